"""Empty values that must not be read as "none given": an empty `x-amz-copy-source` is a
copy with no source (it used to replace the target with the empty body), an empty
`versionId=` names no version (it used to mean the latest, and made a delete marker)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request


@pytest.fixture
def versioned(s3: Any) -> str:
    s3.create_bucket(Bucket="bkt")
    s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
    return str(s3.put_object(Bucket="bkt", Key="k", Body=b"kept")["VersionId"])


def test_an_empty_copy_source_is_invalid_argument(
    gateway: Running, s3: Any, versioned: str
) -> None:
    put = raw_request(gateway, "PUT", "/bkt/k", body=b"", headers={"x-amz-copy-source": ""})
    assert (put.status_code, error_code(put)) == (400, "InvalidArgument")
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"kept"
    assert len(s3.list_object_versions(Bucket="bkt")["Versions"]) == 1
    upload = s3.create_multipart_upload(Bucket="bkt", Key="up")["UploadId"]
    part = raw_request(
        gateway,
        "PUT",
        "/bkt/up",
        {"uploadId": upload, "partNumber": "1"},
        body=b"",
        headers={"x-amz-copy-source": ""},
    )
    assert (part.status_code, error_code(part)) == (400, "InvalidArgument")
    assert "Parts" not in s3.list_parts(Bucket="bkt", Key="up", UploadId=upload)
    empty_version = raw_request(
        gateway, "PUT", "/bkt/copy", body=b"", headers={"x-amz-copy-source": "/bkt/k?versionId="}
    )
    assert (empty_version.status_code, error_code(empty_version)) == (400, "InvalidArgument")


@pytest.mark.parametrize(
    ("method", "subresource"),
    [
        ("GET", ""),
        ("HEAD", ""),
        ("DELETE", ""),
        ("GET", "tagging"),
        ("PUT", "tagging"),
        ("DELETE", "tagging"),
        ("GET", "acl"),
        ("GET", "retention"),
        ("GET", "legal-hold"),
    ],
)
def test_an_empty_version_id_is_invalid_argument(
    gateway: Running, s3: Any, versioned: str, method: str, subresource: str
) -> None:
    params = {"versionId": ""}
    if subresource:
        params[subresource] = ""
    body = b""
    if (method, subresource) == ("PUT", "tagging"):
        body = b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>"
    answer = raw_request(gateway, method, "/bkt/k", params, body, content_md5=bool(body))
    assert answer.status_code == 400
    if method != "HEAD":
        assert error_code(answer) == "InvalidArgument"
    versions = s3.list_object_versions(Bucket="bkt")
    assert [v["VersionId"] for v in versions["Versions"]] == [versioned]
    assert "DeleteMarkers" not in versions  # the DELETE made no marker
    assert s3.get_object_tagging(Bucket="bkt", Key="k")["TagSet"] == []
