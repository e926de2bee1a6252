"""The application file for spark-submit: ``spark-submit [Spark options] "$(kcompact submit-file)" run ...``
runs the same program as ``kcompact run``, in a driver that spark-submit started with the cluster's
master, packages and --conf settings (streaming.spark.session keeps what was submitted)."""

from streaming.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
