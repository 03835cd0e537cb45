#!/bin/sh
# The shop's workload in compose.yaml: every two seconds an order is placed, one is changed and now
# and then one is deleted; at the 30th round the table gets a column (note), at the 60th its qty
# becomes bigint. Each change reaches Iceberg through Debezium, Kafka and ferry.
set -eu
round=$(psql -At -c "SELECT coalesce(max(id), 0) FROM app_db.orders")
while true; do
    round=$((round + 1))
    psql -v ON_ERROR_STOP=1 -q -c "
        INSERT INTO app_db.orders (item, qty) VALUES ('item-$round', $round % 9 + 1);
        UPDATE app_db.orders SET qty = qty + 1 WHERE id = (SELECT min(id) FROM app_db.orders) + $round % 5;"
    if [ $((round % 4)) -eq 0 ]; then
        psql -v ON_ERROR_STOP=1 -q -c "DELETE FROM app_db.orders WHERE id = (SELECT min(id) FROM app_db.orders)"
    fi
    if [ "$round" -eq 30 ]; then
        psql -v ON_ERROR_STOP=1 -q -c "ALTER TABLE app_db.orders ADD COLUMN IF NOT EXISTS note text"
    fi
    if [ "$round" -ge 30 ]; then
        psql -v ON_ERROR_STOP=1 -q -c "UPDATE app_db.orders SET note = 'round $round' WHERE id = (SELECT max(id) FROM app_db.orders)"
    fi
    if [ "$round" -eq 60 ]; then
        psql -v ON_ERROR_STOP=1 -q -c "ALTER TABLE app_db.orders ALTER COLUMN qty TYPE bigint"
    fi
    sleep 2
done
