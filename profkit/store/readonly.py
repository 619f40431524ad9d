"""The read-only connection user SQL runs on (profkit sql, notebooks): it cannot change the
database, whatever SQL it is given.
"""

from __future__ import annotations

import os
import sqlite3
from typing import cast

from profkit.core.dbfile import open_readonly as _open_file_readonly
from profkit.store.connection import ready_to_read


class ReadOnlyConnection(sqlite3.Connection):
    """A connection whose authorizer refuses every change; `denied` says what it refused last."""

    denied: str | None = None


def open_readonly(path: str | os.PathLike) -> ReadOnlyConnection:
    """A connection to a profkit database that cannot change it, whatever SQL it is given.

    Three locks: the file is opened read-only, query_only is set, and an authorizer denies
    every write, ATTACH, PRAGMA change, and functions that load code or leak addresses.
    Temporary data stays in memory (no temp files; profkit.store.query caps SQLite's heap).
    """
    ready_to_read(path)
    # sqlite3.connect builds the factory's class; open_readonly is typed for any Connection
    conn = cast(ReadOnlyConnection, _open_file_readonly(path, factory=ReadOnlyConnection))
    conn.execute("PRAGMA temp_store = MEMORY")

    def authorizer(action, arg1, arg2, dbname, source):
        verdict = _read_only_authorizer(action, arg1, arg2, dbname, source)
        if verdict != sqlite3.SQLITE_OK:
            conn.denied = _describe(action, arg1, arg2)
        return verdict

    conn.set_authorizer(authorizer)
    return conn


_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_READ_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "database_list",
    "compile_options",
    "function_list",
    "pragma_list",
    "table_list",
    "collation_list",
    "module_list",
}
# functions that load code (load_extension, fts3_tokenizer with two arguments), hand out a process
# address (fts3_tokenizer with one, fts5), parse raw r-tree nodes, or touch files (the shell's)
_REFUSED_FUNCTIONS = {
    "load_extension",
    "fts3_tokenizer",
    "fts5",
    "rtreenode",
    "rtreedepth",
    "rtreecheck",
    "sqlite_log",
    "readfile",
    "writefile",
    "edit",
}
_ACTIONS = {
    getattr(sqlite3, n): n[7:].replace("_", " ")
    for n in (
        "SQLITE_CREATE_INDEX",
        "SQLITE_CREATE_TABLE",
        "SQLITE_CREATE_TEMP_INDEX",
        "SQLITE_CREATE_TEMP_TABLE",
        "SQLITE_CREATE_TEMP_TRIGGER",
        "SQLITE_CREATE_TEMP_VIEW",
        "SQLITE_CREATE_TRIGGER",
        "SQLITE_CREATE_VIEW",
        "SQLITE_DELETE",
        "SQLITE_DROP_INDEX",
        "SQLITE_DROP_TABLE",
        "SQLITE_DROP_TEMP_INDEX",
        "SQLITE_DROP_TEMP_TABLE",
        "SQLITE_DROP_TEMP_TRIGGER",
        "SQLITE_DROP_TEMP_VIEW",
        "SQLITE_DROP_TRIGGER",
        "SQLITE_DROP_VIEW",
        "SQLITE_INSERT",
        "SQLITE_PRAGMA",
        "SQLITE_TRANSACTION",
        "SQLITE_UPDATE",
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_ALTER_TABLE",
        "SQLITE_REINDEX",
        "SQLITE_ANALYZE",
        "SQLITE_CREATE_VTABLE",
        "SQLITE_DROP_VTABLE",
        "SQLITE_FUNCTION",
        "SQLITE_SAVEPOINT",
    )
    if hasattr(sqlite3, n)
}


def _describe(action, arg1, arg2) -> str:
    what = _ACTIONS.get(action, f"action {action}")
    if action == sqlite3.SQLITE_FUNCTION:
        return f"function {arg2}()"
    if action == sqlite3.SQLITE_PRAGMA:
        return f"PRAGMA {arg1}" + (f" = {arg2}" if arg2 is not None else "")
    target = arg2 if action in (sqlite3.SQLITE_DROP_INDEX, sqlite3.SQLITE_CREATE_INDEX) else arg1
    return f"{what} on {target}" if target else what


def _read_only_authorizer(action, arg1, arg2, dbname, source):
    if action in _ALLOWED:
        if action == sqlite3.SQLITE_FUNCTION and arg2 and arg2.lower() in _REFUSED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    # read-only pragmas take a table or index name: PRAGMA table_info(launch) is a read
    if action == sqlite3.SQLITE_PRAGMA and arg1 and arg1.lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    # SQLite asks this when it sets up a table-valued function (json_each, pragma_table_info):
    # a real change to the schema table would still meet mode=ro and query_only
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master" and dbname == "main" and source is None:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY
