"""Tests of ripple.identity: sealing, users and keys, the keyring, the commands."""
