"""L1 retrieval: fuse several retrievers' lists, rerank, and step back from broad queries."""
