"""`kcompact snapshot` from the command line: a Parquet snapshot DuckDB reads as the README shows, one line
saying what was written, and one error line for each mistake."""

from __future__ import annotations

import os
import stat

import duckdb

from streaming.cli.main import main
from tests.table.state_dirs import expected, state_dir


def test_a_parquet_snapshot_is_one_line_and_duckdb_reads_it_as_the_readme_shows(tmp_path, capsys) -> None:
    model = state_dir(str(tmp_path / "state"))
    capsys.readouterr()
    out = tmp_path / "orders-table"
    assert main(["snapshot", "--state-dir", model.uri, "--format", "parquet", "--output", str(out),
                 "--value-format", "json", "--topic", "by-offset"]) == 0  # one topic's columns: one table
    said = capsys.readouterr()
    rows = [r for r in expected(model) if r[0] == "by-offset"]
    assert said.out == f"snapshot {out}: {len(rows)} rows written, 2 of 2 partitions changed\n"
    assert said.err == ""
    rows = duckdb.sql(f"SELECT topic, partition, key, value.name FROM read_parquet('{out}/*.parquet') "
                      f"WHERE topic = 'by-offset'").fetchall()
    assert sorted(rows) == sorted((r[0], r[1], r[4], f"v{r[2]}") for r in expected(model) if r[0] == "by-offset")
    assert main(["snapshot", "--state-dir", model.uri, "--format", "parquet", "--output", str(tmp_path / "all"),
                 "--value-format", "json"]) == 2  # three topics' columns in one output: asked for, or refused
    assert capsys.readouterr().err.startswith(f"kcompact: error: --output {tmp_path / 'all'} would merge the columns "
                                              f"of 3 topics (by-header, by-offset, by-time) in one output")


def test_a_sqlite_catalog_in_a_directory_not_made_yet_is_made(tmp_path, capsys) -> None:
    model = state_dir(str(tmp_path / "state"))
    catalog = f"sqlite:///{tmp_path}/new/dir/catalog.db"
    assert main(["snapshot", "--state-dir", model.uri, "--iceberg-table", "a.b", "--iceberg-catalog", catalog]) == 0
    assert (tmp_path / "new" / "dir" / "catalog.db").exists() and (tmp_path / "new" / "dir" / "warehouse").is_dir()


def test_snapshot_outputs_are_as_private_as_the_state_dir_they_copy(tmp_path, capsys, monkeypatch) -> None:
    """Whatever the umask, a Parquet output, a SQLite catalog and a local warehouse are made 0700 with
    files 0600: they hold the mirrored data, as the state dir does."""
    model = state_dir(str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)  # the default catalog and warehouse: ./kcompact-iceberg
    previous = os.umask(0o022)
    try:
        assert main(["snapshot", "--state-dir", model.uri, "--format", "parquet", "--output", "out/parquet"]) == 0
        assert main(["snapshot", "--state-dir", model.uri, "--iceberg-table", "a.b"]) == 0
    finally:
        os.umask(previous)
    made = [p for top in ("out", "kcompact-iceberg") for p in [tmp_path / top, *(tmp_path / top).rglob("*")]]
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in made}
    assert len([p for p in made if p.is_file()]) > 6, modes
    assert {path: mode for path, mode in modes.items()
            if mode != (0o700 if (tmp_path / path).is_dir() else 0o600)} == {}, modes


def test_each_mistake_is_one_line(tmp_path, capsys) -> None:
    model = state_dir(str(tmp_path / "state"))
    capsys.readouterr()
    cases = [
        (["--format", "parquet"], "--format parquet writes to --output DIR"),
        ([], "say where the snapshot goes"),
        (["--iceberg-table", "orders"], "--iceberg-table: 'orders' is not NAMESPACE.TABLE"),
        (["--format", "parquet", "--output", str(tmp_path / "state" / "kcompact.json")], "is a file"),
        (["--iceberg-table", "a.b", "--iceberg-catalog", "catalog.db"], "is not a URI"),
        (["--iceberg-table", "a.b", "--iceberg-catalog", "http://127.0.0.1:9"], "Iceberg table a.b in http://127.0.0.1:9: "
                                                                             "ConnectionError"),
        (["--topic", "nope", "--format", "parquet", "--output", str(tmp_path / "o")], "topic 'nope' is not mirrored"),
    ]
    for argv, words in cases:
        assert main(["snapshot", "--state-dir", model.uri, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("kcompact: error: ") and words in err, (argv, err)
    for where in (["--format", "parquet", "--output", str(tmp_path / "o")], ["--iceberg-table", "a.b"]):
        assert main(["snapshot", "--state-dir", str(tmp_path / "none"), *where]) == 2
        assert "holds no compactor state" in capsys.readouterr().err
        assert main(["snapshot", "--state-dir", f"{model.uri}/kcompact.json", *where]) == 2
        assert "is a file, not a directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not (tmp_path / "kcompact-iceberg").exists()
