"""The change records' commit triggers as migration 0002 installed them (frozen: never edit).

They take a record's position and commit timestamp from its partition's row, which makes
positions dense and in commit order. On PostgreSQL a deferred constraint trigger, which runs
inside COMMIT, set them on the record inserted without them; 0004 drops it (the writer now
moves the partition row on itself), and its downgrade puts it back. On SQLite the INSERT
takes them from the partition row and a row trigger moves the row on; 0004 rebuilds the table
and installs the trigger again. A transaction (its `transaction_id`) keeps one commit
timestamp per partition however many records it has there.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

# (`%%` because the driver formats parameters even when there are none.)
POSTGRES_TRIGGER = """
CREATE OR REPLACE FUNCTION ripple_change_record_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  pos bigint;
  ts bigint;
BEGIN
  UPDATE change_partitions p
     SET next_position = p.next_position + 1,
         last_commit_ns = CASE WHEN p.last_transaction = NEW.transaction_id
                               THEN p.last_commit_ns
                               ELSE greatest(p.last_commit_ns + 1, NEW.commit_ns) END,
         last_transaction = NEW.transaction_id
   WHERE p.stream_name = NEW.stream_name AND p.partition = NEW.partition
   RETURNING p.next_position, p.last_commit_ns INTO pos, ts;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'change stream %% has no partition %%', NEW.stream_name, NEW.partition;
  END IF;
  UPDATE change_records SET position = pos, commit_ns = ts WHERE id = NEW.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER change_records_commit AFTER INSERT ON change_records
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ripple_change_record_commit();
"""

SQLITE_TRIGGER = """
CREATE TRIGGER change_records_commit AFTER INSERT ON change_records FOR EACH ROW BEGIN
  UPDATE change_partitions
     SET next_position = NEW.position,
         last_commit_ns = NEW.commit_ns,
         last_transaction = NEW.transaction_id
   WHERE stream_name = NEW.stream_name AND partition = NEW.partition;
END
"""


def install_commit_trigger(conn: Connection) -> None:
    """The database's trigger, on a `change_records` table as 0002 created it."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(POSTGRES_TRIGGER)
    else:
        conn.exec_driver_sql(SQLITE_TRIGGER)
