"""The gateway on the wire, below boto3's conveniences: signatures refused, S3 error XML,
501 for what is not implemented, request ids, presigned URLs, virtual-hosted-style
addressing, health and metrics, and the request context reaching the change stream."""

from __future__ import annotations

import json
import uuid
from typing import Any
from xml.etree import ElementTree as ET

import boto3
import httpx
import pytest
import sqlalchemy as sa
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from ripple.changestream.schema import change_records
from ripple.gateway.server import Gateway, bind
from tests.gateway.conftest import wait_for
from tests.gateway.helpers import code_of


def error_of(response: httpx.Response) -> dict[str, str]:
    root = ET.fromstring(response.content)
    assert root.tag == "Error"
    return {child.tag: child.text or "" for child in root}


def test_anonymous_requests_are_refused(gateway: Any) -> None:
    response = httpx.get(f"{gateway.url}/")
    assert response.status_code == 403
    error = error_of(response)
    assert error["Code"] == "AccessDenied"
    assert error["RequestId"] == response.headers["x-amz-request-id"]
    assert response.headers["x-amz-id-2"]


def test_wrong_secret_and_unknown_key(gateway: Any) -> None:
    with pytest.raises(ClientError) as e:
        gateway.client(secret="x" * 40).list_buckets()
    assert code_of(e) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as e:
        gateway.client(access_key="AKIANOSUCHKEY0000000").list_buckets()
    assert code_of(e) == "InvalidAccessKeyId"


def test_error_xml_names_the_resource(gateway: Any) -> None:
    s3 = gateway.client(signature_version="s3v4")
    s3.create_bucket(Bucket="photos")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "photos", "Key": "no/such"})
    response = httpx.get(url)
    assert response.status_code == 404
    error = error_of(response)
    assert error["Code"] == "NoSuchKey"
    assert error["Resource"] == "/photos/no/such"
    assert error["Message"]


def test_presigned_urls(gateway: Any) -> None:
    s3 = gateway.client(signature_version="s3v4")
    s3.create_bucket(Bucket="photos")
    put = s3.generate_presigned_url(
        "put_object", Params={"Bucket": "photos", "Key": "a b+c.txt"}, ExpiresIn=60
    )
    assert httpx.put(put, content=b"presigned").status_code == 200
    get = s3.generate_presigned_url("get_object", Params={"Bucket": "photos", "Key": "a b+c.txt"})
    response = httpx.get(get)
    assert response.status_code == 200
    assert response.content == b"presigned"
    tampered = get.replace("a%20b", "a%20x")
    assert error_of(httpx.get(tampered))["Code"] == "SignatureDoesNotMatch"


def test_signature_version_2_is_refused_clearly(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "photos", "Key": "k"})
    assert "Signature=" in url  # botocore presigns with version 2 unless told otherwise
    response = httpx.get(url)
    assert response.status_code in (400, 403)
    assert "AWS4-HMAC-SHA256" in error_of(response)["Message"]


def test_not_implemented_is_501_not_500(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="photos")
    with pytest.raises(ClientError) as e:
        s3.put_bucket_policy(Bucket="photos", Policy='{"Version": "2012-10-17"}')
    assert code_of(e) == "NotImplemented"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501
    with pytest.raises(ClientError) as e:
        s3.put_bucket_cors(
            Bucket="photos",
            CORSConfiguration={"CORSRules": [{"AllowedMethods": ["GET"], "AllowedOrigins": ["*"]}]},
        )
    assert code_of(e) == "NotImplemented"


@pytest.mark.parametrize(
    ("call", "code"),
    [
        ("get_bucket_policy", "NoSuchBucketPolicy"),
        ("get_bucket_policy_status", "NoSuchBucketPolicy"),
        ("get_bucket_cors", "NoSuchCORSConfiguration"),
        ("get_bucket_website", "NoSuchWebsiteConfiguration"),
        ("get_bucket_encryption", "ServerSideEncryptionConfigurationNotFoundError"),
        ("get_bucket_tagging", "NoSuchTagSet"),
        ("get_bucket_replication", "ReplicationConfigurationNotFoundError"),
        ("get_public_access_block", "NoSuchPublicAccessBlockConfiguration"),
        ("get_bucket_ownership_controls", "OwnershipControlsNotFoundError"),
    ],
)
def test_configurations_ripple_does_not_keep_read_as_absent(s3: Any, call: str, code: str) -> None:
    """What S3 answers for a bucket without one: tools that read them before acting
    (aws-cli, rclone, Terraform) see "none", not 501."""
    s3.create_bucket(Bucket="photos")
    with pytest.raises(ClientError) as e:
        getattr(s3, call)(Bucket="photos")
    assert (code_of(e), e.value.response["ResponseMetadata"]["HTTPStatusCode"]) == (code, 404)
    with pytest.raises(ClientError) as e:
        getattr(s3, call)(Bucket="nowhere")
    assert code_of(e) == "NoSuchBucket"


def test_configurations_answered_empty(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    assert "LoggingEnabled" not in s3.get_bucket_logging(Bucket="photos")
    assert "Status" not in s3.get_bucket_accelerate_configuration(Bucket="photos")
    assert s3.get_bucket_request_payment(Bucket="photos")["Payer"] == "BucketOwner"
    for delete in ("delete_bucket_policy", "delete_bucket_cors", "delete_bucket_tagging"):
        answer = getattr(s3, delete)(Bucket="photos")
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_methods_s3_does_not_have_are_405(gateway: Any) -> None:
    for method in ("OPTIONS", "PATCH", "TRACE", "PROPFIND", "FOO"):
        answer = httpx.request(method, gateway.url + "/photos/k")
        assert answer.status_code == 405, method
        assert error_of(answer)["Code"] == "MethodNotAllowed"


def test_malformed_xml_is_refused_and_changes_nothing(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    client = s3
    for document in (
        b"<VersioningConfiguration><Status>Enabled",
        b"<!DOCTYPE x [<!ENTITY a 'b'>]><x/>",
    ):

        def replace_body(request: Any, document: bytes = document, **_: Any) -> None:
            request.data = document
            for name in list(request.headers):
                if name.lower() == "content-md5" or name.lower().startswith("x-amz-checksum-"):
                    del request.headers[name]

        client.meta.events.register_first("before-sign.s3.PutBucketVersioning", replace_body)
        with pytest.raises(ClientError) as e:
            client.put_bucket_versioning(
                Bucket="photos", VersioningConfiguration={"Status": "Enabled"}
            )
        assert code_of(e) == "MalformedXML"
        client.meta.events.unregister("before-sign.s3.PutBucketVersioning", replace_body)
    assert "Status" not in s3.get_bucket_versioning(Bucket="photos")


def test_virtual_hosted_style(gateway: Any, s3: Any) -> None:
    gateway.services.domain = "s3.example.test"
    s3.create_bucket(Bucket="photos")
    s3.put_object(Bucket="photos", Key="dir/k.txt", Body=b"vhost")
    # signed for the virtual host, sent to the loopback address with that Host header
    request = AWSRequest(
        "GET",
        "http://photos.s3.example.test/dir/k.txt",
        headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
    )
    S3SigV4Auth(Credentials(gateway.key.access_key_id, gateway.secret), "s3", "us-east-1").add_auth(
        request
    )
    headers = {**dict(request.headers.items()), "Host": "photos.s3.example.test"}
    response = httpx.get(f"{gateway.url}/dir/k.txt", headers=headers)
    assert response.status_code == 200, response.text
    assert response.content == b"vhost"


def test_health_and_metrics(s3: Any, gateway: Any) -> None:
    assert httpx.get(f"{gateway.url}/_ripple/health").text == "ok\n"
    s3.create_bucket(Bucket="photos")
    metrics = httpx.get(f"{gateway.url}/_ripple/metrics").text
    assert 'ripple_s3_requests_total{operation="CreateBucket",status="200"} 1.0' in metrics
    assert 'ripple_s3_metabase_calls_waiting{kind="writes"} 0.0' in metrics
    assert 'ripple_s3_metabase_calls_waiting{kind="reads"} 0.0' in metrics


def test_request_context_goes_into_the_change_stream(gateway: Any, s3: Any) -> None:
    db = gateway.services.db
    db.eventing = lambda _project, bucket: bucket == "photos"
    s3.create_bucket(Bucket="photos")
    put = s3.put_object(Bucket="photos", Key="k", Body=b"x" * 10)
    request_id = put["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    host_id = put["ResponseMetadata"]["HTTPHeaders"]["x-amz-id-2"]
    with db.read() as conn:
        tags = [
            json.loads(row.transaction_tag)
            for row in conn.execute(
                sa.select(change_records.c.transaction_tag).where(
                    change_records.c.stream_name == "bucket_eventing"
                )
            )
        ]
    assert len(tags) == 1
    tag = tags[0]
    assert tag["request_id"] == request_id
    assert tag["host_id"] == host_id
    assert tag["operation"] == "put"
    assert tag["source_ip"] == "127.0.0.1"
    assert tag["etag"] == put["ETag"].strip('"')
    assert uuid.UUID(tag["principal"]) == gateway.key.project_public_id


def test_port_in_use_is_a_clear_error(gateway: Any) -> None:
    taken = gateway.url.removeprefix("http://")
    with pytest.raises(Exception, match="cannot listen on"):
        bind(taken)


def test_stop_and_start_again(services: Any) -> None:
    server = Gateway(services, bind("127.0.0.1:0"))
    server.start()
    wait_for(lambda: server.started, what="the gateway to start")
    assert httpx.get(f"{server.url}/_ripple/health").status_code == 200
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/_ripple/health")


def test_a_key_that_is_not_utf8_is_invalid_uri(gateway: Any) -> None:
    response = httpx.get(f"{gateway.url}/photos/%ff")
    assert response.status_code == 400
    assert error_of(response)["Code"] == "InvalidURI"


def test_a_configured_region_is_enforced(gateway: Any) -> None:
    gateway.services.region = "eu-central-1"
    gateway.services.enforce_region = True
    with pytest.raises(ClientError) as e:
        gateway.client().list_buckets()  # signed for us-east-1
    assert code_of(e) == "AuthorizationHeaderMalformed"
    assert "expecting 'eu-central-1'" in e.value.response["Error"]["Message"]
    right = boto3.client(
        "s3",
        endpoint_url=gateway.url,
        region_name="eu-central-1",
        aws_access_key_id=gateway.key.access_key_id,
        aws_secret_access_key=gateway.secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    assert right.list_buckets()["Buckets"] == []


def test_a_signed_aws_chunked_upload(s3: Any, gateway: Any) -> None:
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD end to end: the seed signed by botocore, each
    chunk signed by the test, a flipped byte refused with nothing stored."""
    import hashlib
    import hmac

    from botocore.auth import SigV4Auth

    s3.create_bucket(Bucket="photos")
    payload = bytes(range(256)) * 300  # 76,800 bytes: two 64 KiB chunks and the final one

    def request_for(key: str, tamper: bool = False) -> httpx.Response:
        chunks = [payload[i : i + 65536] for i in range(0, len(payload), 65536)] + [b""]
        encoded_length = sum(
            len(f"{len(c):x};chunk-signature=".encode()) + 64 + 2 + len(c) + 2 for c in chunks
        )
        request = AWSRequest(
            "PUT",
            f"{gateway.url}/photos/{key}",
            headers={
                "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                "x-amz-decoded-content-length": str(len(payload)),
                "content-encoding": "aws-chunked",
                "content-length": str(encoded_length),
            },
        )
        credentials = Credentials(gateway.key.access_key_id, gateway.secret)
        SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
        assert request.headers["x-amz-content-sha256"] == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
        amz_date = request.headers["X-Amz-Date"]
        scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
        previous = request.headers["Authorization"].rsplit("Signature=", 1)[1]
        key_bytes = ("AWS4" + gateway.secret).encode()
        for part in (amz_date[:8], "us-east-1", "s3", "aws4_request"):
            key_bytes = hmac.new(key_bytes, part.encode(), hashlib.sha256).digest()
        body = bytearray()
        empty = hashlib.sha256(b"").hexdigest()
        for chunk in chunks:
            to_sign = "\n".join(
                [
                    "AWS4-HMAC-SHA256-PAYLOAD",
                    amz_date,
                    scope,
                    previous,
                    empty,
                    hashlib.sha256(chunk).hexdigest(),
                ]
            )
            previous = hmac.new(key_bytes, to_sign.encode(), hashlib.sha256).hexdigest()
            body += f"{len(chunk):x};chunk-signature={previous}\r\n".encode() + chunk + b"\r\n"
        assert len(body) == encoded_length
        if tamper:
            body[100] ^= 1
        return httpx.put(
            f"{gateway.url}/photos/{key}",
            content=bytes(body),
            headers=dict(request.headers.items()),
        )

    response = request_for("chunked")
    assert response.status_code == 200, response.text
    assert s3.get_object(Bucket="photos", Key="chunked")["Body"].read() == payload
    refused = request_for("tampered", tamper=True)
    assert error_of(refused)["Code"] == "SignatureDoesNotMatch"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="photos").get("Contents", [])]
    assert keys == ["chunked"]
