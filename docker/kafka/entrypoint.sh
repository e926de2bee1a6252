#!/usr/bin/env bash
# Writes server.properties from defaults for a single node and the KAFKA_* environment (each variable one
# setting, named as the apache/kafka image names them: KAFKA_ and the name upper-cased, '.' written '_', '_'
# written '__', '-' written '___'), formats the storage on first start, then runs the broker.
set -euo pipefail

declare -A props=(
  [process.roles]="broker,controller"
  [node.id]="1"
  [controller.quorum.voters]="1@localhost:9093"
  [listeners]="PLAINTEXT://:9092,CONTROLLER://localhost:9093"
  [advertised.listeners]="PLAINTEXT://localhost:9092"
  [controller.listener.names]="CONTROLLER"
  [listener.security.protocol.map]="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  [log.dirs]="/var/lib/kafka/data"
  [offsets.topic.replication.factor]="1"
  [transaction.state.log.replication.factor]="1"
  [transaction.state.log.min.isr]="1"
  [share.coordinator.state.topic.replication.factor]="1"
  [share.coordinator.state.topic.min.isr]="1"
  [group.initial.rebalance.delay.ms]="0"
)
for var in $(compgen -e); do
  case "$var" in
    KAFKA_HEAP_OPTS|KAFKA_OPTS) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  name="${var#KAFKA_}"
  name="${name//___/-}"
  name="${name//__/@}"
  name="${name//_/.}"
  name="${name//@/_}"
  props["${name,,}"]="${!var}"
done

config=/opt/kafka/server.properties
: > "$config"
for key in "${!props[@]}"; do
  printf '%s=%s\n' "$key" "${props[$key]}" >> "$config"
done

java=(java ${KAFKA_HEAP_OPTS} ${KAFKA_OPTS:-} -XX:+UseG1GC -Djava.awt.headless=true
      -Dlog4j2.configurationFile=/opt/kafka/log4j2.yaml -cp '/opt/kafka/libs/*')
log_dir="${props[log.dirs]%%,*}"
if [ ! -f "$log_dir/meta.properties" ]; then
  "${java[@]}" kafka.tools.StorageTool format -t "${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$config"
fi
exec "${java[@]}" kafka.Kafka "$config"
