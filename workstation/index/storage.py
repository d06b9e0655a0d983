"""The knowledge map's SQL: functions the database owner runs as `fn(con, *args)`.

Everything here is called through `Database.call`, so arguments and results
are plain picklable data and every write is idempotent (delete, then insert,
in one transaction). Bulk rows travel as tab-separated text that DuckDB's CSV
reader loads far faster than bound parameters: the indexer's worker processes
format it in parallel, and the owner only writes it to a temp file.

TSV conventions (`refs_tsv`, `symbols_tsv`, `deps_tsv` write them): every text
field is quoted with `"` (a `"` inside doubled), so text may hold tabs, newlines
or anything else; the bare, unquoted `\\N` is NULL and a quoted "\\N" is that
text; the first column is a 1-based index into the call's `paths`.
"""

from __future__ import annotations

import os
import tempfile
from typing import Iterable, Sequence

from ..store.broker import readonly

FILE_COLUMNS = ("path", "language", "kind", "size", "mtime_ns", "ctime_ns", "inode", "sha256",
                "line_count", "purpose", "purpose_source", "has_errors", "indexed_at_ns", "parser_version")

_TSV_TABLES = {
    "symbols": (("fid", "BIGINT"), ("name", "VARCHAR"), ("qualname", "VARCHAR"), ("kind", "VARCHAR"),
                ("parent", "VARCHAR"), ("signature", "VARCHAR"), ("start_line", "INTEGER"),
                ("end_line", "INTEGER")),
    "refs": (("fid", "BIGINT"), ("name", "VARCHAR"), ("line", "INTEGER"), ("enclosing", "VARCHAR"),
             ("kind", "VARCHAR")),
    "deps": (("fid", "BIGINT"), ("module", "VARCHAR"), ("names", "VARCHAR"), ("line", "INTEGER"),
             ("target", "VARCHAR")),
}
_TSV_SELECT = {
    "symbols": "name, qualname, kind, parent, signature, start_line, end_line",
    "refs": "name, line, enclosing, kind",
    # names travel as one field (see join_names); NULL means an empty list
    "deps": """module, coalesce([replace(replace(n, chr(30) || '1', chr(31)), chr(30) || '0', chr(30))
                                 FOR n IN string_split(names, chr(31))], []::VARCHAR[]), line, target""",
}
NAMES_SEP, NAMES_ESC = "\x1f", "\x1e"
NULL = "\\N"


def join_names(names: Iterable[str]) -> str:
    """Imported names as one field, joined by U+001F. A name holding that separator survives:
    U+001E is written as U+001E '0' and U+001F as U+001E '1', which _TSV_SELECT undoes."""
    return NAMES_SEP.join(n.replace(NAMES_ESC, NAMES_ESC + "0").replace(NAMES_SEP, NAMES_ESC + "1")
                          for n in names)


# ---------------------------------------------------------------------------------------
# Rows as bulk text (formatted in the indexer's worker processes)

Q, QQ = '"', '""'


def _text(value: str | None) -> str:
    """One text field of a bulk row: quoted, so that nothing in it can end the field or the row, or
    pass for the NULL marker."""
    return NULL if value is None else Q + value.replace(Q, QQ) + Q


def refs_tsv(fid: str, refs: list[tuple]) -> str:
    """refs: (name, line, enclosing, kind) rows, as parser.parse_rows gives them."""
    # References are most of the rows: written unquoted when that is exact (an unquoted field is
    # read as is), which a few counts over the whole text prove; quoted otherwise.
    text = "".join([f"{fid}\t{name}\t{line}\t{NULL if enc is None else enc}\t{kind}\n"
                    for name, line, enc, kind in refs])
    nulls = sum(1 for ref in refs if ref[2] is None)
    if (text.count("\t") == 4 * len(refs) and text.count("\n") == len(refs) and text.count("\\") == nulls
            and Q not in text and "\r" not in text):
        return text
    return "".join([f"{fid}\t{_text(name)}\t{line}\t{_text(enc)}\t{_text(kind)}\n"
                    for name, line, enc, kind in refs])


def symbols_tsv(fid: str, symbols) -> str:
    """symbols: parser Symbols."""
    return "".join([f"{fid}\t{_text(s.name)}\t{_text(s.qualname)}\t{_text(s.kind)}\t{_text(s.parent)}\t"
                    f"{_text(s.signature)}\t{s.start_line}\t{s.end_line}\n" for s in symbols])


def deps_tsv(fid: str, deps: list[tuple]) -> str:
    """deps: (Import, resolved target or None) pairs."""
    return "".join([f"{fid}\t{_text(imp.module)}\t{_text(join_names(imp.names) if imp.names else None)}\t"
                    f"{imp.line}\t{_text(target)}\n" for imp, target in deps])


def _load_tsv(con, table: str, tsv: str, files: Sequence[str], paths: list[str]) -> None:
    """Insert the rows of `tsv` and of the TSV `files` into kmap.`table`, in one statement."""
    if not tsv and not files:
        return
    columns = _TSV_TABLES[table]
    spec = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in columns) + "}"
    tmp = None
    try:
        if tsv:
            fd, tmp = tempfile.mkstemp(prefix=f"ws-{table}-", suffix=".tsv")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(tsv)
        con.execute(
            f"""INSERT INTO kmap.{table}
                SELECT p.path, {_TSV_SELECT[table]}
                FROM read_csv($files, header=false, auto_detect=false, delim='\t', quote='"', escape='"',
                              nullstr='\\N', allow_quoted_nulls=false, new_line='\\n', columns={spec}) AS t
                JOIN (SELECT unnest($paths) AS path, generate_subscripts($paths, 1) AS fid) AS p USING (fid)""",
            {"paths": paths, "files": list(files) + ([tmp] if tmp else [])})
    finally:
        if tmp is not None:
            os.unlink(tmp)


def write_index(con, paths: list[str], files: list[tuple], tsv: dict[str, str],
                skipped: list[tuple[str, str, str]], removed: list[str],
                spooled: dict[str, list[str]] | None = None) -> None:
    """Replace everything known about the given files in one transaction.

    `files` are full rows (FILE_COLUMNS order) of files (re)indexed now; their
    symbols, refs and deps arrive in `tsv`, or in the TSV files named by `spooled`
    (written by the indexer's worker processes; the caller deletes them once this
    returns). `skipped` are (path, reason, detail);
    `removed` paths are dropped. Old rows of every path named go in the same
    transaction, so a reader never sees a file's old and new symbols mixed.
    A file with no purpose of its own takes the model-written one cached for its
    content (describe.py), if there is one.
    """
    touched = sorted({f[0] for f in files} | {s[0] for s in skipped} | set(removed))
    con.execute("BEGIN TRANSACTION")
    try:
        if touched:
            con.execute("CREATE OR REPLACE TEMP TABLE ws_touched AS SELECT unnest($1::VARCHAR[]) AS path",
                        [touched])
            for table in ("symbols", "refs", "deps", "files", "skipped"):
                con.execute(f"DELETE FROM kmap.{table} WHERE path IN (SELECT path FROM ws_touched)")
        if files:
            cols = list(zip(*files))
            con.execute(
                f"INSERT INTO kmap.files ({', '.join(FILE_COLUMNS)}) SELECT "
                + ", ".join(f"unnest(${i + 1})" for i in range(len(FILE_COLUMNS))),
                [list(c) for c in cols])
        spooled = spooled or {}
        for table in _TSV_TABLES:
            _load_tsv(con, table, tsv.get(table, ""), spooled.get(table, ()), paths)
        if skipped:
            con.execute("INSERT INTO kmap.skipped SELECT unnest($1), unnest($2), unnest($3)",
                        [list(c) for c in zip(*skipped)])
        if files:
            con.execute(
                """UPDATE kmap.files SET purpose = c.purpose, purpose_source = 'model' FROM kmap.purpose_cache c
                   WHERE kmap.files.sha256 = c.sha256 AND kmap.files.purpose = ''
                     AND kmap.files.path IN (SELECT path FROM ws_touched)""")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def restamp(con, rows: list[tuple]) -> None:
    """Record a new stat signature for files whose content was checked unchanged.

    rows: (path, sha256, size, mtime_ns, ctime_ns, inode, indexed_at_ns); a row
    whose stored hash differs (someone re-indexed meanwhile) is left alone.
    """
    if not rows:
        return
    cols = [list(c) for c in zip(*rows)]
    con.execute(
        """UPDATE kmap.files SET size = u.size, mtime_ns = u.mtime_ns, ctime_ns = u.ctime_ns,
                  inode = u.inode, indexed_at_ns = u.indexed_at_ns
           FROM (SELECT unnest($1) AS path, unnest($2) AS sha256, unnest($3) AS size,
                        unnest($4) AS mtime_ns, unnest($5) AS ctime_ns, unnest($6) AS inode,
                        unnest($7) AS indexed_at_ns) AS u
           WHERE kmap.files.path = u.path AND kmap.files.sha256 = u.sha256""", cols)


@readonly
def index_state(con, paths: list[str] | None = None) -> tuple[list[tuple], list[tuple]]:
    """(files, skipped): the stat signature of every indexed file, every skipped path.

    files rows: (path, size, mtime_ns, ctime_ns, inode, sha256, indexed_at_ns, language, parser_version);
    skipped rows: (path, reason, detail). `paths` limits both to those paths.
    """
    where, params = "", []
    if paths is not None:
        where, params = " WHERE path IN (SELECT unnest($1::VARCHAR[]))", [paths]
    files = con.execute(
        "SELECT path, size, mtime_ns, ctime_ns, inode, sha256, indexed_at_ns, language, parser_version"
        " FROM kmap.files"
        + where, params).fetchall()
    skipped = con.execute("SELECT path, reason, detail FROM kmap.skipped" + where, params).fetchall()
    return files, skipped


@readonly
def paths_under(con, folders: list[str]) -> list[str]:
    """Indexed or skipped paths inside any of `folders` (for folder deletes and renames)."""
    if not folders:
        return []
    rows = con.execute(
        """SELECT path FROM (SELECT path FROM kmap.files UNION ALL SELECT path FROM kmap.skipped)
           WHERE EXISTS (SELECT 1 FROM unnest($1::VARCHAR[]) AS t(f) WHERE starts_with(path, f || '/'))""",
        [folders]).fetchall()
    return [r[0] for r in rows]


@readonly
def unresolved_deps(con, hints: list[str], retarget: list[str]) -> list[tuple]:
    """Imports that a newly added or removed file may now resolve differently.

    Returns (path, language, module, names, line) of deps that are unresolved and
    mention one of `hints`, or that pointed at one of the `retarget` paths.
    """
    rows = con.execute(
        """SELECT d.path, f.language, d.module, d.names, d.line
           FROM kmap.deps d JOIN kmap.files f USING (path)
           WHERE (d.target IS NULL AND (list_has_any(d.names, $1::VARCHAR[])
                  OR EXISTS (SELECT 1 FROM unnest($1::VARCHAR[]) AS t(h) WHERE contains(d.module, h))))
              OR d.target IN (SELECT unnest($2::VARCHAR[]))""",
        [hints, retarget]).fetchall()
    return rows


def set_dep_targets(con, updates: list[tuple]) -> None:
    """updates: (path, module, line, target or None)."""
    if not updates:
        return
    cols = [list(c) for c in zip(*updates)]
    con.execute(
        """UPDATE kmap.deps SET target = u.target
           FROM (SELECT unnest($1) AS path, unnest($2) AS module, unnest($3) AS line,
                        unnest($4::VARCHAR[]) AS target) AS u
           WHERE kmap.deps.path = u.path AND kmap.deps.module = u.module AND kmap.deps.line = u.line""",
        cols)


@readonly
def dep_targets(con, path: str) -> list[str | None]:
    """The resolved targets of a file's imports, in source order."""
    return [r[0] for r in con.execute("SELECT target FROM kmap.deps WHERE path = ? ORDER BY line, module",
                                      [path]).fetchall()]


@readonly
def totals(con) -> dict:
    files, symbols, references = con.execute(
        """SELECT (SELECT count(*) FROM kmap.files), (SELECT count(*) FROM kmap.symbols),
                  (SELECT count(*) FROM kmap.refs)""").fetchone()
    skipped = dict(con.execute("SELECT reason, count(*) FROM kmap.skipped GROUP BY reason").fetchall())
    return {"files": files, "symbols": symbols, "references": references, "skipped": skipped}


def prune_purposes(con) -> int:
    """Drop cached model-written purposes of content no file has any more, and any that does not read
    as a description (an error reply stored by an older version): the files holding one lose it, to be
    described again. Returns how many cached purposes went."""
    from .describe import clean_purpose  # lazy: describe and query, +11 ms on every `workstation index`

    bad = [sha for sha, purpose in con.execute("SELECT sha256, purpose FROM kmap.purpose_cache").fetchall()
           if clean_purpose(purpose) != purpose]
    gone = con.execute(
        "DELETE FROM kmap.purpose_cache WHERE sha256 NOT IN (SELECT sha256 FROM kmap.files)").fetchone()[0]
    if bad:
        con.execute("DELETE FROM kmap.purpose_cache WHERE sha256 IN (SELECT unnest($1::VARCHAR[]))", [bad])
    con.execute("""UPDATE kmap.files SET purpose = '', purpose_source = 'source'
                   WHERE purpose_source = 'model' AND sha256 NOT IN (SELECT sha256 FROM kmap.purpose_cache)""")
    return gone + len(bad)
