"""The Kafka brokers the project runs for the demo, the tests and `kcompact broker`: an external cluster, the
project's Kafka image in a container, or Apache Kafka run locally from Maven-fetched jars (one node or a
three-node cluster); and the project's images. The only package that talks to Docker."""
