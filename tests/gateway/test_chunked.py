"""aws-chunked bodies: AWS's documented signed example, bodies botocore itself produces,
a small independent encoder for signed trailers, fed whole and byte by byte; then broken
bodies; and the checksums against their published check values."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import random
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum, Sha1Checksum, Sha256Checksum

from ripple.gateway.checksums import Checksums, checksum_for, verify_checksums
from ripple.gateway.chunked import MAX_LINE, ChunkedDecoder
from ripple.gateway.errors import S3Error
from ripple.gateway.sigv4 import SignedRequest, verify

# "Signature Calculations for the Authorization Header: Transferring Payload in Multiple
# Chunks" in the S3 API reference: 66560 bytes of 'a' in chunks of 64 KiB.
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_DATE = "20130524T000000Z"
AWS_SCOPE = "20130524/us-east-1/s3/aws4_request"
AWS_SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
AWS_CHUNK_SIGNATURES = [
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
]
AWS_HEADERS = {
    "host": "s3.amazonaws.com",
    "x-amz-date": AWS_DATE,
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "content-encoding": "aws-chunked",
    "x-amz-decoded-content-length": "66560",
    "content-length": "66824",
    "authorization": f"AWS4-HMAC-SHA256 Credential={AWS_KEY}/{AWS_SCOPE},SignedHeaders="
    "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
    f"x-amz-decoded-content-length;x-amz-storage-class,Signature={AWS_SEED}",
}
PAYLOAD = b"a" * 66560
EMPTY = hashlib.sha256(b"").hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def aws_signing_key() -> bytes:
    key = _hmac(b"AWS4" + AWS_SECRET.encode(), AWS_DATE[:8])
    for part in ("us-east-1", "s3", "aws4_request"):
        key = _hmac(key, part)
    return key


def aws_signed_request(mode: str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") -> SignedRequest:
    return SignedRequest(AWS_KEY, mode, aws_signing_key(), AWS_SEED, AWS_SCOPE, AWS_DATE, False)


def encode_signed(
    payload: bytes,
    chunk_size: int,
    *,
    trailers: dict[str, str] | None = None,
    signatures: list[str] | None = None,
) -> bytes:
    """An independent encoder: signed chunks (and signed trailers when given)."""
    key, previous = aws_signing_key(), AWS_SEED
    chunks = [payload[i : i + chunk_size] for i in range(0, len(payload), chunk_size)] + [b""]
    body = bytearray()
    for chunk in chunks:
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256-PAYLOAD", AWS_DATE, AWS_SCOPE, previous, EMPTY, sha256(chunk)]
        )
        previous = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if signatures is not None:
            signatures.append(previous)
        body += f"{len(chunk):x};chunk-signature={previous}\r\n".encode() + chunk
        if chunk or trailers is None:
            body += b"\r\n"
    if trailers is not None:
        canonical = "".join(f"{name}:{value}\n" for name, value in sorted(trailers.items()))
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256-TRAILER", AWS_DATE, AWS_SCOPE, previous, sha256(canonical.encode())]
        )
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        for name, value in trailers.items():
            body += f"{name}:{value}\r\n".encode()
        body += f"x-amz-trailer-signature:{signature}\r\n\r\n".encode()
    return bytes(body)


def b64(number: int, size: int) -> str:
    return base64.b64encode(number.to_bytes(size, "big")).decode()


def crc32_of(data: bytes) -> str:
    return b64(zlib.crc32(data), 4)


def decode(
    decoder: ChunkedDecoder, body: bytes, pieces: Callable[[bytes], list[bytes]] | None = None
) -> tuple[bytes, dict[str, str]]:
    parts = pieces(body) if pieces else [body]
    out = b"".join(decoder.feed(part) for part in parts)
    return out, decoder.finish()


def one_byte(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def random_splits(body: bytes, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(body)), min(40, len(body) - 1)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def refused(code: str, decoder: ChunkedDecoder, body: bytes) -> S3Error:
    with pytest.raises(S3Error) as caught:
        decode(decoder, body)
    assert caught.value.code == code, caught.value.message
    assert "\n" not in caught.value.message
    return caught.value


def unsigned(trailers: list[str] | None = None, length: int | None = None) -> ChunkedDecoder:
    return ChunkedDecoder(None, decoded_length=length, trailer_names=trailers or [])


# AWS's signed example.


def test_aws_example_encoder_matches_documented_signatures() -> None:
    signatures: list[str] = []
    body = encode_signed(PAYLOAD, 65536, signatures=signatures)
    assert signatures == AWS_CHUNK_SIGNATURES
    assert len(body) == int(AWS_HEADERS["content-length"])


@pytest.mark.parametrize("pieces", [None, one_byte, random_splits])
def test_aws_example_decodes(pieces: Callable[[bytes], list[bytes]] | None) -> None:
    signed = verify(
        "PUT",
        "/examplebucket/chunkObject.txt",
        "",
        AWS_HEADERS,
        {AWS_KEY: AWS_SECRET}.get,
        datetime(2013, 5, 24, tzinfo=UTC),
    )
    assert signed is not None
    assert signed.streaming
    assert signed.seed_signature == AWS_SEED
    decoder = ChunkedDecoder(signed, decoded_length=66560, trailer_names=[])
    out, trailers = decode(decoder, encode_signed(PAYLOAD, 65536), pieces)
    assert out == PAYLOAD
    assert trailers == {}


def test_decoded_bytes_come_out_as_they_arrive() -> None:
    body = encode_signed(PAYLOAD, 65536)
    decoder = ChunkedDecoder(aws_signed_request(), decoded_length=66560, trailer_names=[])
    assert decoder.feed(body[:1000]) == b"a" * (1000 - body.index(b"\r\n") - 2)


@pytest.mark.parametrize("where", [200, 65800, 66400])  # in chunks 1 and 2
def test_aws_example_flipped_data_byte(where: int) -> None:
    body = bytearray(encode_signed(PAYLOAD, 65536))
    body[where] ^= 0x01
    decoder = ChunkedDecoder(aws_signed_request(), decoded_length=66560, trailer_names=[])
    error = refused("SignatureDoesNotMatch", decoder, bytes(body))
    assert error.status == 403


def test_aws_example_flipped_signature() -> None:
    body = encode_signed(PAYLOAD, 65536).replace(b"0055627c", b"0055627d")
    decoder = ChunkedDecoder(aws_signed_request(), decoded_length=None, trailer_names=[])
    refused("SignatureDoesNotMatch", decoder, body)


def test_wrong_seed_signature() -> None:
    other = SignedRequest(AWS_KEY, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", aws_signing_key(),
                          "0" * 64, AWS_SCOPE, AWS_DATE, False)  # fmt: skip
    decoder = ChunkedDecoder(other, decoded_length=None, trailer_names=[])
    refused("SignatureDoesNotMatch", decoder, encode_signed(b"abc", 2))


def test_signed_chunk_without_signature() -> None:
    decoder = ChunkedDecoder(aws_signed_request(), decoded_length=None, trailer_names=[])
    refused("SignatureDoesNotMatch", decoder, b"3\r\nabc\r\n0\r\n\r\n")


def test_unsigned_mode_ignores_chunk_extensions() -> None:
    out, _ = decode(unsigned(), b"5;foo=bar\r\nhello\r\n3;chunk-signature=x\r\n!!!\r\n0\r\n\r\n")
    assert out == b"hello!!!"


# Signed chunks with signed trailers (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER).

TRAILER_MODE = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"


@pytest.mark.parametrize("pieces", [None, one_byte])
def test_signed_trailer(pieces: Callable[[bytes], list[bytes]] | None) -> None:
    payload = bytes(range(256)) * 40
    body = encode_signed(payload, 4096, trailers={"x-amz-checksum-crc32": crc32_of(payload)})
    decoder = ChunkedDecoder(
        aws_signed_request(TRAILER_MODE), decoded_length=len(payload),
        trailer_names=["x-amz-checksum-crc32"],
    )  # fmt: skip
    out, trailers = decode(decoder, body, pieces)
    assert out == payload
    assert trailers == {"x-amz-checksum-crc32": crc32_of(payload)}
    assert decoder.checksums.digests() == trailers


def test_signed_trailer_after_an_empty_line() -> None:
    payload = b"hello trailer"
    body = encode_signed(payload, 5, trailers={"x-amz-checksum-crc32": crc32_of(payload)})
    body = body.replace(b"x-amz-trailer-signature", b"\r\nx-amz-trailer-signature")
    decoder = ChunkedDecoder(
        aws_signed_request(TRAILER_MODE),
        decoded_length=None,
        trailer_names=["x-amz-checksum-crc32"],
    )
    assert decode(decoder, body)[0] == payload


def test_endless_trailers_are_bounded() -> None:
    body = encode_signed(b"", 5, trailers={"x-amz-checksum-crc32": "AAAAAA=="})
    body = body[: body.index(b"x-amz-trailer-signature")] + b"\r\n" * 10_000
    decoder = ChunkedDecoder(
        aws_signed_request(TRAILER_MODE),
        decoded_length=None,
        trailer_names=["x-amz-checksum-crc32"],
    )
    with pytest.raises(S3Error) as caught:
        decoder.feed(body)
    assert caught.value.code == "InvalidRequest"
    assert "trailers exceed" in caught.value.message


def test_signed_trailer_tampered() -> None:
    payload = b"hello trailer"
    body = encode_signed(payload, 5, trailers={"x-amz-checksum-crc32": crc32_of(payload)})
    body = body.replace(crc32_of(payload).encode(), crc32_of(b"other").encode())
    decoder = ChunkedDecoder(
        aws_signed_request(TRAILER_MODE),
        decoded_length=None,
        trailer_names=["x-amz-checksum-crc32"],
    )
    refused("SignatureDoesNotMatch", decoder, body)


def test_signed_trailer_without_signature() -> None:
    payload = b"hello trailer"
    body = encode_signed(payload, 5, trailers={"x-amz-checksum-crc32": crc32_of(payload)})
    body = body[: body.index(b"x-amz-trailer-signature")] + b"\r\n"
    decoder = ChunkedDecoder(
        aws_signed_request(TRAILER_MODE),
        decoded_length=None,
        trailer_names=["x-amz-checksum-crc32"],
    )
    refused("SignatureDoesNotMatch", decoder, body)


def test_signed_trailer_with_wrong_checksum() -> None:
    payload = b"hello trailer"
    body = encode_signed(payload, 5, trailers={"x-amz-checksum-crc32": crc32_of(b"nope")})
    decoder = ChunkedDecoder(
        aws_signed_request(TRAILER_MODE),
        decoded_length=None,
        trailer_names=["x-amz-checksum-crc32"],
    )
    error = refused("BadDigest", decoder, body)
    assert error.message.startswith("The CRC32 you specified did not match the calculated checksum")


# Unsigned chunks with a trailer, as botocore sends them.


def botocore_body(payload: bytes, chunk_size: int, checksum_cls: Any = Crc32Checksum) -> bytes:
    wrapper = AwsChunkedWrapper(
        io.BytesIO(payload),
        checksum_cls=checksum_cls,
        checksum_name="x-amz-checksum-" + checksum_cls.__name__[:-8].lower(),
        chunk_size=chunk_size,
    )
    return wrapper.read()  # type: ignore[no-any-return]


@pytest.mark.parametrize("pieces", [None, one_byte, random_splits])
@pytest.mark.parametrize(
    ("checksum_cls", "name"),
    [
        (Crc32Checksum, "x-amz-checksum-crc32"),
        (Sha1Checksum, "x-amz-checksum-sha1"),
        (Sha256Checksum, "x-amz-checksum-sha256"),
    ],
)
def test_botocore_unsigned_trailer(
    checksum_cls: Any, name: str, pieces: Callable[[bytes], list[bytes]] | None
) -> None:
    payload = random.Random(3).randbytes(3000)
    body = botocore_body(payload, 1000, checksum_cls)
    assert body.startswith(b"3e8\r\n")
    assert body.endswith(b"\r\n\r\n")
    decoder = unsigned([name], len(payload))
    out, trailers = decode(decoder, body, pieces)
    assert out == payload
    assert list(trailers) == [name]
    assert decoder.checksums.digests() == trailers


def test_botocore_unsigned_trailer_empty_payload() -> None:
    out, trailers = decode(unsigned(["x-amz-checksum-crc32"], 0), botocore_body(b"", 1000))
    assert out == b""
    assert trailers == {"x-amz-checksum-crc32": "AAAAAA=="}


def test_botocore_wrong_trailing_checksum() -> None:
    body = botocore_body(b"hello world", 4).replace(crc32_of(b"hello world").encode(), b"AAAAAA==")
    error = refused("BadDigest", unsigned(["x-amz-checksum-crc32"]), body)
    assert "CRC32" in error.message


class Captured(Exception):
    def __init__(self, request: Any) -> None:
        self.request = request


def _capture(request: Any, **_: Any) -> None:
    raise Captured(request)


def test_boto3_put_object_end_to_end() -> None:
    """What boto3's PutObject sends today: verify the signature, then decode the body."""
    s3 = boto3.client(
        "s3",
        endpoint_url="https://s3.example.com",
        region_name="us-east-1",
        aws_access_key_id="AK",
        aws_secret_access_key="SK",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    s3.meta.events.register("before-send.s3", _capture)
    payload = random.Random(5).randbytes(5000)
    with pytest.raises(Captured) as caught:
        s3.put_object(Bucket="b", Key="dir/k k", Body=payload)
    request = caught.value.request
    headers = {
        k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
    }
    headers["host"] = "s3.example.com"
    path, _, query = request.url.removeprefix("https://s3.example.com").partition("?")
    signed = verify("PUT", path, query, headers, {"AK": "SK"}.get, datetime.now(UTC))
    assert signed is not None
    assert signed.payload_hash == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    decoder = ChunkedDecoder(
        signed,
        decoded_length=int(headers["x-amz-decoded-content-length"]),
        trailer_names=headers["x-amz-trailer"].split(","),
    )
    out, trailers = decode(decoder, request.body.read(), one_byte)
    assert out == payload
    assert trailers == {"x-amz-checksum-crc32": crc32_of(payload)}


# Broken bodies.

SMALL = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n"


def test_small_body_decodes() -> None:
    out, trailers = decode(unsigned(["x-amz-checksum-crc32"], 11), SMALL)
    assert out == b"hello world"
    assert trailers == {"x-amz-checksum-crc32": "DUoRhQ=="}


@pytest.mark.parametrize("cut", [*range(len(SMALL) - 2), len(SMALL) - 1])
def test_truncated_body(cut: int) -> None:
    decoder = unsigned(["x-amz-checksum-crc32"], 11)
    error = refused("IncompleteBody", decoder, SMALL[:cut])
    assert error.status == 400


def test_final_empty_line_may_be_missing() -> None:
    out, trailers = decode(unsigned(["x-amz-checksum-crc32"], 11), SMALL[:-2])
    assert out == b"hello world"
    assert trailers


def test_truncated_signed_body() -> None:
    body = encode_signed(PAYLOAD, 65536)
    decoder = ChunkedDecoder(aws_signed_request(), decoded_length=None, trailer_names=[])
    refused("IncompleteBody", decoder, body[:-200])


@pytest.mark.parametrize(
    "header", [b"zz", b"-1", b"", b"0x5", b"1 2", b"1" * 17, b";chunk-signature=ab"]
)
def test_bad_chunk_size(header: bytes) -> None:
    refused("InvalidChunkSizeError", unsigned(), header + b"\r\nhello\r\n0\r\n\r\n")


def test_endless_chunk_header_is_bounded() -> None:
    decoder = unsigned()
    with pytest.raises(S3Error) as caught:
        decode(
            decoder, b"1" * 10_000, lambda body: [body[i : i + 100] for i in range(0, 10_000, 100)]
        )
    assert caught.value.code == "InvalidChunkSizeError"
    assert len(decoder._line) <= MAX_LINE


def test_chunk_longer_than_its_size() -> None:
    refused("IncompleteBody", unsigned(), b"5\r\nhello!\r\n0\r\n\r\n")


def test_decoded_length_too_small() -> None:
    decoder = unsigned(length=10)
    with pytest.raises(S3Error) as caught:
        decoder.feed(b"5\r\nhello\r\n6\r\n")  # refused before the data is handed out
    assert caught.value.code == "IncompleteBody"


def test_decoded_length_too_large() -> None:
    refused("IncompleteBody", unsigned(length=12), b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")


def test_data_after_the_end() -> None:
    refused("InvalidRequest", unsigned(), b"5\r\nhello\r\n0\r\n\r\nmore")


def test_undeclared_trailer() -> None:
    refused("InvalidRequest", unsigned(), SMALL)


def test_declared_trailer_missing() -> None:
    refused("IncompleteBody", unsigned(["x-amz-checksum-crc32"]), b"5\r\nhello\r\n0\r\n\r\n")


def test_malformed_trailer_line() -> None:
    body = b"5\r\nhello\r\n0\r\nno colon here\r\n\r\n"
    refused("InvalidRequest", unsigned(["x-amz-checksum-crc32"]), body)


def test_unsupported_trailer_checksum() -> None:
    with pytest.raises(S3Error) as caught:
        unsigned(["x-amz-checksum-xxhash64"])
    assert caught.value.code == "InvalidRequest"


def test_errors_are_sticky() -> None:
    decoder = unsigned()
    with pytest.raises(S3Error):
        decoder.feed(b"zz\r\n")
    with pytest.raises(S3Error):
        decoder.feed(b"5\r\nhello\r\n0\r\n\r\n")
    with pytest.raises(S3Error):
        decoder.finish()


def test_not_a_streaming_request() -> None:
    plain = SignedRequest(AWS_KEY, EMPTY, b"k", AWS_SEED, AWS_SCOPE, AWS_DATE, False)
    with pytest.raises(ValueError, match="aws-chunked"):
        ChunkedDecoder(plain, decoded_length=None, trailer_names=[])


# Checksums.

CHECK = b"123456789"  # the standard CRC check input


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("crc32", (0xCBF43926).to_bytes(4, "big")),
        ("crc32c", (0xE3069283).to_bytes(4, "big")),
        ("crc64nvme", (0xAE8B14860A799888).to_bytes(8, "big")),
        ("sha1", bytes.fromhex("f7c3bc1d808e04732adf679965ccc34ca7ae3441")),
        (
            "sha256",
            bytes.fromhex("15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225"),
        ),
    ],
)
def test_check_values(name: str, expected: bytes) -> None:
    whole = checksum_for(name)
    whole.update(CHECK)
    assert whole.digest() == expected
    pieces = checksum_for("x-amz-checksum-" + name)
    for byte in CHECK:
        pieces.update(bytes([byte]))
    assert pieces.digest() == expected


def test_crc32c_and_crc64nvme_other_values() -> None:
    crc32c = checksum_for("crc32c")
    crc32c.update(b"\x00" * 32)  # RFC 3720 B.4
    assert crc32c.digest() == (0x8A9136AA).to_bytes(4, "big")
    empty = checksum_for("crc64nvme")
    assert empty.digest() == bytes(8)


def test_checksums_match_botocore() -> None:
    data = random.Random(11).randbytes(10_000)
    sums = Checksums(["crc32", "x-amz-checksum-sha1", "SHA256"])
    sums.update(data[:3333])
    sums.update(data[3333:])
    for cls, name in [(Crc32Checksum, "crc32"), (Sha1Checksum, "sha1"), (Sha256Checksum, "sha256")]:
        reference = cls()
        reference.update(data)
        assert sums.digests()["x-amz-checksum-" + name] == reference.b64digest()
    assert sums.names == ["x-amz-checksum-crc32", "x-amz-checksum-sha1", "x-amz-checksum-sha256"]


def test_checksums_verify() -> None:
    sums = Checksums(["crc32c"])
    sums.update(CHECK)
    good = {"x-amz-checksum-crc32c": b64(0xE3069283, 4)}
    sums.verify(good)
    with pytest.raises(S3Error) as caught:
        sums.verify({"x-amz-checksum-crc32c": b64(0xE3069284, 4)})
    assert caught.value.code == "BadDigest"
    assert "CRC32C" in caught.value.message
    for bad in ["not base64!", b64(1, 8), ""]:
        with pytest.raises(S3Error) as caught:
            sums.verify({"x-amz-checksum-crc32c": bad})
        assert caught.value.code == "InvalidRequest"
    with pytest.raises(S3Error) as caught:
        sums.verify({})
    assert caught.value.code == "InvalidRequest"


def test_verify_checksums_for_plain_uploads() -> None:
    headers = {
        "x-amz-checksum-crc32": crc32_of(CHECK),
        "x-amz-checksum-type": "FULL_OBJECT",
        "content-type": "text/plain",
    }
    assert verify_checksums(headers, CHECK) == {"x-amz-checksum-crc32": crc32_of(CHECK)}
    with pytest.raises(S3Error) as caught:
        verify_checksums(headers, CHECK + b"!")
    assert caught.value.code == "BadDigest"
    assert verify_checksums({"content-type": "x"}, CHECK) == {}


def test_unsupported_checksum() -> None:
    with pytest.raises(S3Error) as caught:
        checksum_for("md4")
    assert caught.value.code == "InvalidRequest"
    with pytest.raises(S3Error):
        Checksums.from_headers({"x-amz-checksum-xxhash3": "AAAA"})
