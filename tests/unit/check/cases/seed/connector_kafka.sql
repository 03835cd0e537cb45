-- Incompatible: changing the connector type from datagen to Kafka.
-- (The seed elides the other Kafka options with "..."; these are the ones Kafka needs.)
CREATE TABLE MyTable (
  a INT,
  b BIGINT,
  c VARCHAR
) WITH (
  'connector' = 'kafka',
  'topic' = 'my-topic',
  'properties.bootstrap.servers' = 'localhost:9092',
  'format' = 'json'
);

SELECT a, SUM(b), MAX(c) FROM MyTable GROUP BY a;
