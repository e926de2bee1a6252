"""Records between librdkafka and column buffers (the source's batch fetch, the emitter's batch produce) are a C
extension, built at install with the C compiler scripts/bootstrap.sh makes sure of; it needs neither
librdkafka's headers nor linking against it. Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("streaming.kafka.native._rdkafka_columns", ["streaming/kafka/native/_rdkafka_columns.c"],
                             extra_compile_args=["-O2", "-Wall"])])
