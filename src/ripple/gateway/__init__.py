"""The S3 gateway: an ASGI app (Starlette, served by uvicorn) that real S3 clients use
unchanged. It authenticates (SigV4), translates S3's wire format to metabase operations and
back, and keeps object data on the local filesystem; semantics stay in the metabase."""
