"""The snapshotter: durable, paginated archives of event streams, with an index and replay.

Events are published per writer (a topic, a bucket…), acknowledged once they are in a local
write-ahead log, buffered per writer, written as compressed pages to object storage, and
listed in an index from which they are replayed. The `Snapshotter` (`service`) ties the
pieces together; `settings` configures one.

What each module is for, and how pages, durability, replay and compaction work:
docs/snapshotter.md ("Code" lists the modules).
"""
