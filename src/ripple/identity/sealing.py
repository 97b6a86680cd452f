"""Sealed secret keys: AES-256-GCM under a 32-byte master key kept in the data directory.

The master key is `<data_dir>/secret.key`, created on first use with mode 0600 and refused
when group or others may use it or its length is wrong. A secret is sealed with its access
key id as the associated data, so a sealed secret copied to another key's row does not
open. Neither the master key nor a secret ever appears in a repr or an error message.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ripple.identity.errors import MasterKeyError, SealError

MASTER_KEY_FILE = "secret.key"
MASTER_KEY_BYTES = 32
_VERSION = b"\x01"  # sealed = version, 12-byte nonce, ciphertext, 16-byte tag
_NONCE_BYTES = 12
_TAG_BYTES = 16


def master_key_path(data_dir: Path) -> Path:
    return data_dir / MASTER_KEY_FILE


class MasterKey:
    """The key that seals and opens access key secrets."""

    __slots__ = ("_aead", "path")

    def __init__(self, key: bytes, path: Path | None = None) -> None:
        if len(key) != MASTER_KEY_BYTES:
            raise MasterKeyError(f"a master key is {MASTER_KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)
        self.path = path

    def __repr__(self) -> str:
        return f"MasterKey(path={self.path!r}, key=<hidden>)"

    @classmethod
    def generate(cls) -> MasterKey:
        return cls(AESGCM.generate_key(bit_length=MASTER_KEY_BYTES * 8))

    @classmethod
    def load(cls, data_dir: Path, *, create: bool = False) -> MasterKey:
        """The master key of the data directory; with `create`, made there if missing.

        Raises `MasterKeyError` if the file is missing (and not to be created), is not a
        regular file, is open to group or others, or does not hold exactly 32 bytes."""
        path = master_key_path(data_dir)
        if create and not path.exists():
            _create(path)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            raise MasterKeyError(
                f"master key {path} does not exist: is data-dir (RIPPLE_DATA_DIR) the one "
                "the access keys were created with?"
            ) from None
        except OSError as e:
            raise MasterKeyError(f"cannot read master key {path}: {e.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise MasterKeyError(f"master key {path} is not a regular file")
            mode = stat.S_IMODE(info.st_mode)
            if os.name == "posix" and mode & 0o077:
                raise MasterKeyError(
                    f"master key {path} is accessible to group or others (mode {mode:04o}); "
                    f"run `chmod 600 {path}`"
                )
            key = os.read(fd, MASTER_KEY_BYTES + 1)
        finally:
            os.close(fd)
        if len(key) != MASTER_KEY_BYTES:
            raise MasterKeyError(
                f"master key {path} must hold exactly {MASTER_KEY_BYTES} bytes, it holds "
                f"{info.st_size}; restore the original file (secrets sealed with another key "
                "cannot be opened)"
            )
        return cls(key, path)

    def seal(self, access_key_id: str, secret: str) -> bytes:
        """The secret encrypted and authenticated for this access key id."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode("utf-8"), _aad(access_key_id))
        return _VERSION + nonce + sealed

    def open(self, access_key_id: str, sealed: bytes) -> str:
        """The secret sealed for this access key id; `SealError` if it does not open."""
        if not sealed.startswith(_VERSION) or len(sealed) < 1 + _NONCE_BYTES + _TAG_BYTES:
            raise SealError(f"the sealed secret of access key {access_key_id} is malformed")
        nonce, ciphertext = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            plain = self._aead.decrypt(nonce, ciphertext, _aad(access_key_id))
        except InvalidTag:
            raise SealError(
                f"the secret of access key {access_key_id} does not open with master key "
                f"{self.path or '(in memory)'}: it was sealed under another master key or "
                "for another access key, or was altered"
            ) from None
        return plain.decode("utf-8")


def _aad(access_key_id: str) -> bytes:
    return access_key_id.encode("utf-8")


def _create(path: Path) -> None:
    """Write a new master key to `path` unless one appears there first. The key is written
    to a private temporary file and linked into place, so nobody reads a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            if os.name == "posix":
                os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, AESGCM.generate_key(bit_length=MASTER_KEY_BYTES * 8))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another process made it first: use it
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
