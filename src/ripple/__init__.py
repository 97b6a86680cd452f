"""ripple: S3-compatible bucket event notifications.

A metabase with S3 versioning and object lock, a change stream written in the same
transaction as each change, and (in later packages) a Spark pipeline that turns change
records into S3 event messages and delivers them to each bucket's destinations.
"""

__version__ = "0.1.0"
