"""Identity: users (projects with access keys), their access keys with sealed secrets, and
what each key may do.

    project, key, secret = create_user(db, settings.data_dir, "alice")
    restricted, secret = create_key(db, settings.data_dir, "alice", bucket="photos",
                                    prefix="2024/", denied=("delete",))
    keyring = Keyring(db, settings.data_dir)          # the gateway's lookups, cached
    keyring.secret_of(access_key_id)                  # for SigV4; None if unknown or revoked
    keyring.key(access_key_id).permits("write", "photos", "2024/a.jpg")

`ripple user` and `ripple key` are the commands for operators.
"""

from ripple.identity.errors import (
    BadInput,
    IdentityError,
    KeyExists,
    MasterKeyError,
    SealError,
    UnknownKey,
    UnknownUser,
    UserExists,
)
from ripple.identity.keyring import DEFAULT_TTL, Keyring
from ripple.identity.keys import ACTIONS, AccessKey
from ripple.identity.sealing import MASTER_KEY_FILE, MasterKey
from ripple.identity.users import (
    User,
    create_key,
    create_user,
    list_keys,
    list_users,
    revoke_key,
)

__all__ = [
    "ACTIONS",
    "DEFAULT_TTL",
    "MASTER_KEY_FILE",
    "AccessKey",
    "BadInput",
    "IdentityError",
    "KeyExists",
    "Keyring",
    "MasterKey",
    "MasterKeyError",
    "SealError",
    "UnknownKey",
    "UnknownUser",
    "User",
    "UserExists",
    "create_key",
    "create_user",
    "list_keys",
    "list_users",
    "revoke_key",
]
