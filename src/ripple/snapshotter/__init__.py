"""The snapshotter: durable, paginated archives of event streams, with an index and replay.

Events are published per writer (a topic, a bucket…), acknowledged once they are in a local
write-ahead log, buffered per writer, written as compressed pages to object storage, and
listed in an index from which they are replayed. Layout:

| module | what it is for |
|---|---|
| `proto/` | the wire formats: publish API, pages, write-ahead log records |
| `settings` | a snapshotter's configuration (`[snapshotters.NAME]` in ripple.toml) |
| `formats` | the names of the page formats and compressions it may be configured with |
| `pages` | pages to bytes and back: protobuf or NDJSON, none / gzip / zstd |
| `keys` | page keys from templates such as `{writer_id}/{date}/{sequence}.pb.zst` |
| `storage/` | where pages go: the filesystem or any S3 endpoint |
| `index/` | where pages are listed: SQLite, Redis or PostgreSQL |
| `wal` | the write-ahead log: appends fsynced in groups, replayed after a crash |
| `buffers` | per-writer buffers and the triggers that seal them into pages |
| `writer` | sealed pages to storage (retries, dead letters), then to the index |
| `service` | the `Snapshotter`: publish, disconnect, flush, shutdown, recovery |
| `grpc_server`, `client` | the `PubSubBasicInterface` gRPC service and its client |
| `replay`, `reconcile`, `compact` | reading back, rebuilding the index, merging small pages |
"""
