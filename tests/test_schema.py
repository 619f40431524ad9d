import re
import sqlite3

from profkit.schema import LATEST, VIEWS
from profkit.store import Store
from profdata import ROOT


def test_views_have_their_documented_columns(db):
    Store(db).close()
    with sqlite3.connect(db) as c:
        for view, cols in VIEWS.items():
            have = [r[1] for r in c.execute(f"PRAGMA table_info({view})")]
            assert set(cols) <= set(have), (view, set(cols) - set(have))
        assert c.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == LATEST


def test_docs_list_every_view_column():
    doc = (ROOT / "docs" / "schema.md").read_text()
    for view, cols in VIEWS.items():
        m = re.search(rf"### `{view}\(([^)]*)\)`", doc)
        assert m, view
        documented = {c.strip() for c in m.group(1).split(",")}
        assert set(cols) <= documented, (view, set(cols) - documented)


def test_migrations_are_idempotent(db):
    Store(db).close()
    Store(db).close()
    with sqlite3.connect(db) as c:
        assert [r[0] for r in c.execute("SELECT version FROM schema_migrations")] == list(range(1, LATEST + 1))
