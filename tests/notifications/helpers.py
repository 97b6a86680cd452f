"""What the notification tests share: topic ARNs and a configuration with every kind of
filter, for the model's tests and the S3 document's."""

from __future__ import annotations

from ripple.notifications.configuration import Notification

PHOTOS = "arn:aws:sns:us-east-1:123456789012:photos"
LOGS = "arn:aws:sns:us-east-1:123456789012:logs"

# key, regex and metadata filters, a prefix alone, a suffix alone (with XML's special characters)
FULL = [
    Notification(
        "thumbs",
        PHOTOS,
        ("s3:ObjectCreated:Put", "s3:ObjectCreated:Copy"),
        "images/",
        ".jpg",
        r"images/[^/]+\.jpg",
        (("x-amz-meta-color", "red"), ("Owner", "")),
    ),
    Notification("plain", PHOTOS, ("s3:ObjectRemoved:*",), prefix="trash/"),
    Notification("suffix-only", LOGS, ("s3:ObjectCreated:*",), suffix=".log & <more>"),
]
