"""`aws-chunked` request bodies and the `x-amz-checksum-*` checksums that come with uploads.

`ChunkedDecoder` turns the body of a request whose x-amz-content-sha256 names a STREAMING-*
mode back into the object's bytes as they arrive: it checks each chunk signature (signed
modes), the trailing headers and their signature, the decoded length, and the declared
checksums (`ripple.gateway.checksums`). Decoded bytes are handed out before the chunk they
belong to is fully checked, so a caller writes them provisionally and keeps them only when
`finish()` returns.
"""

from __future__ import annotations

import hashlib
import hmac

from ripple.gateway.checksums import CHECKSUM_PREFIX, Checksums
from ripple.gateway.errors import S3Error
from ripple.gateway.sigv4 import (
    EMPTY_SHA256,
    STREAMING_PAYLOAD,
    STREAMING_PAYLOAD_TRAILER,
    STREAMING_UNSIGNED_PAYLOAD_TRAILER,
    SignedRequest,
    sign,
)

TRAILER_SIGNATURE = "x-amz-trailer-signature"
MAX_LINE = 4096  # a chunk header or trailer line; a signed chunk header is under 100 bytes
MAX_TRAILER = 16384  # all trailer lines together

_HEADER, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class ChunkedDecoder:
    """Decodes an `aws-chunked` body fed in pieces of any size; see the module docstring.

    `signed` is the request's `SignedRequest` (its payload hash names the mode) or None for
    unsigned chunks; `decoded_length` is x-amz-decoded-content-length; `trailer_names` the
    names in x-amz-trailer. Declared `x-amz-checksum-*` trailers are computed and verified
    here; `checksums.digests()` has their values once `finish()` returned.
    """

    def __init__(
        self, signed: SignedRequest | None, *, decoded_length: int | None, trailer_names: list[str]
    ) -> None:
        mode = signed.payload_hash if signed is not None else STREAMING_UNSIGNED_PAYLOAD_TRAILER
        if mode not in (
            STREAMING_PAYLOAD,
            STREAMING_PAYLOAD_TRAILER,
            STREAMING_UNSIGNED_PAYLOAD_TRAILER,
        ):
            raise ValueError(f"{mode!r} is not an aws-chunked payload mode")
        self._signed = signed if mode != STREAMING_UNSIGNED_PAYLOAD_TRAILER else None
        self._signed_trailer = mode == STREAMING_PAYLOAD_TRAILER
        self._previous = signed.seed_signature if signed is not None else ""
        self._decoded_length = decoded_length
        names = (name.strip().lower() for entry in trailer_names for name in entry.split(","))
        self._trailer_names = [name for name in names if name]
        self.checksums = Checksums(
            name for name in self._trailer_names if name.startswith(CHECKSUM_PREFIX)
        )
        self._state = _HEADER
        self._line = bytearray()  # a chunk header or trailer line not yet complete
        self._chunk = 0  # number of the chunk being read, from 1
        self._remaining = 0  # bytes of the current chunk not yet read
        self._chunk_signature = ""
        self._chunk_hash = hashlib.sha256()
        self._length = 0
        self._trailer_signed = False
        self._trailer_bytes = 0
        self._trailers: dict[str, str] = {}
        self._error: S3Error | None = None

    def feed(self, data: bytes) -> bytes:
        """Take the next piece of the body; the payload bytes it completes."""
        if self._error is not None:
            raise self._error
        try:
            return self._feed(data)
        except S3Error as error:
            self._error = error
            raise

    def finish(self) -> dict[str, str]:
        """Check that the body ended where it should; its trailing headers (lower-case)."""
        if self._error is not None:
            raise self._error
        try:
            if self._state == _TRAILER and not self._line:
                self._end_trailers()  # the final empty line may be left out
            if self._state != _DONE:
                raise S3Error(
                    "IncompleteBody",
                    f"The body ended inside chunk {self._chunk}; resend the whole body.",
                )
            return dict(self._trailers)
        except S3Error as error:
            self._error = error
            raise

    def _feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        view = memoryview(data)
        pos, end = 0, len(data)
        while pos < end:
            if self._state == _DATA:
                take = min(self._remaining, end - pos)
                piece = bytes(view[pos : pos + take])
                pos += take
                self._remaining -= take
                self._chunk_hash.update(piece)
                self.checksums.update(piece)
                out.append(piece)
                if not self._remaining:
                    self._check_chunk_signature()
                    self._state = _DATA_END
            elif self._state == _DATA_END:
                take = min(2 - len(self._line), end - pos)
                self._line += view[pos : pos + take]
                pos += take
                if len(self._line) == 2:
                    if self._line != b"\r\n":
                        raise S3Error(
                            "IncompleteBody",
                            f"Chunk {self._chunk} is not followed by CRLF; its size does not "
                            "match its data. Resend the body.",
                        )
                    self._line.clear()
                    self._state = _HEADER
            elif self._state == _DONE:
                raise S3Error(
                    "InvalidRequest",
                    "The body goes on after its final chunk and trailers; send nothing after them.",
                )
            else:
                newline = data.find(b"\n", pos)
                stop = end if newline < 0 else newline
                if len(self._line) + stop - pos > MAX_LINE:
                    raise S3Error(
                        "InvalidChunkSizeError",
                        f"A chunk header or trailer line is longer than {MAX_LINE} bytes; "
                        "send the aws-chunked format.",
                    )
                self._line += view[pos:stop]
                pos = end if newline < 0 else newline + 1
                if newline >= 0:
                    line = bytes(self._line.removesuffix(b"\r"))
                    self._line.clear()
                    if self._state == _HEADER:
                        self._chunk_header(line)
                    else:
                        self._trailer_line(line)
        return b"".join(out)

    def _chunk_header(self, line: bytes) -> None:
        self._chunk += 1
        size_text, _, extensions = line.partition(b";")
        size_text = size_text.strip()
        if not size_text or len(size_text) > 16 or size_text.strip(b"0123456789abcdefABCDEF"):
            raise S3Error(
                "InvalidChunkSizeError",
                f"Chunk {self._chunk} has no valid hex size ({line[:40]!r}); "
                "send the aws-chunked format.",
            )
        size = int(size_text, 16)
        self._length += size
        if self._decoded_length is not None and self._length > self._decoded_length:
            raise S3Error(
                "IncompleteBody",
                f"The chunks hold more than x-amz-decoded-content-length "
                f"({self._decoded_length}) bytes; send the length of the decoded payload.",
            )
        if self._signed is not None:
            signature = b""
            for extension in extensions.split(b";"):
                name, _, value = extension.partition(b"=")
                if name.strip() == b"chunk-signature":
                    signature = value.strip()
            self._chunk_signature = signature.decode("ascii", "replace")
            self._chunk_hash = hashlib.sha256()
        self._remaining = size
        if size:
            self._state = _DATA
        else:
            self._check_chunk_signature()
            self._state = _TRAILER

    def _check_chunk_signature(self) -> None:
        """Verify the chunk just read (signed modes); its signature chains to the next."""
        if self._signed is not None:
            chunk_hash = self._chunk_hash.hexdigest()
            what = f"chunk {self._chunk}"
            self._check("PAYLOAD", [EMPTY_SHA256, chunk_hash], self._chunk_signature, what)

    def _check(self, kind: str, hashes: list[str], provided: str, what: str) -> None:
        """Compare a chunk's or the trailers' signature; it becomes the previous signature."""
        if self._signed is None:
            raise RuntimeError("a signature to check in an unsigned upload")
        parts = [f"AWS4-HMAC-SHA256-{kind}", self._signed.amz_date, self._signed.scope]
        expected = sign(self._signed.signing_key, "\n".join([*parts, self._previous, *hashes]))
        if not hmac.compare_digest(expected.encode(), provided.encode()):
            raise S3Error(
                "SignatureDoesNotMatch",
                f"The signature of {what} does not match; check your key and signing method.",
            )
        self._previous = expected

    def _trailer_line(self, line: bytes) -> None:
        self._trailer_bytes += len(line) + 2
        if self._trailer_bytes > MAX_TRAILER:
            raise S3Error("InvalidRequest", f"The trailers exceed {MAX_TRAILER} bytes; send fewer.")
        if not line:
            if self._signed_trailer and self._trailers and not self._trailer_signed:
                return  # some signers put an empty line before x-amz-trailer-signature
            self._end_trailers()
            return
        text = line.decode("utf-8", "replace")
        name, colon, value = text.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise S3Error(
                "InvalidRequest", f"Trailer line {text[:80]!r} is not 'name:value'; fix it."
            )
        if self._trailer_signed:
            raise S3Error(
                "InvalidRequest", "A trailer follows x-amz-trailer-signature; sign every trailer."
            )
        if name == TRAILER_SIGNATURE and self._signed_trailer:
            # The trailers signed as canonical headers: sorted "name:value\n" lines.
            canonical = "".join(f"{key}:{self._trailers[key]}\n" for key in sorted(self._trailers))
            hashes = [hashlib.sha256(canonical.encode()).hexdigest()]
            self._check("TRAILER", hashes, value.strip(), "the trailers")
            self._trailer_signed = True
            return
        if name not in self._trailer_names or name in self._trailers:
            raise S3Error(
                "InvalidRequest",
                f"Trailer {name!r} was not declared in x-amz-trailer; declare every trailer once.",
            )
        self._trailers[name] = value.strip()

    def _end_trailers(self) -> None:
        """After the empty line that ends the body: everything declared arrived and checks out."""
        if self._signed_trailer and self._trailer_names and not self._trailer_signed:
            raise S3Error(
                "SignatureDoesNotMatch",
                "The trailers carry no x-amz-trailer-signature; sign the trailers.",
            )
        for name in self._trailer_names:
            if name not in self._trailers:
                raise S3Error(
                    "IncompleteBody",
                    f"The body ended without the trailer {name} declared in x-amz-trailer; "
                    "resend it with the trailer.",
                )
        if self._decoded_length is not None and self._length != self._decoded_length:
            raise S3Error(
                "IncompleteBody",
                f"The body decoded to {self._length} bytes but x-amz-decoded-content-length "
                f"says {self._decoded_length}; resend the whole body.",
            )
        self.checksums.verify(self._trailers)
        self._state = _DONE
