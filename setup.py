"""The source's batch fetch (streaming.kafka.batch_fetch) is a C extension, built at install with the C compiler
scripts/bootstrap.sh makes sure of; it needs neither librdkafka's headers nor linking against it. Everything
else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("streaming.kafka._batch_fetch", ["streaming/kafka/_batch_fetch.c"],
                             extra_compile_args=["-O2", "-Wall"])])
