-- Adding field d is fully compatible: d is not referenced in the SELECT statement.
CREATE TABLE MyTable (
  a INT,
  b BIGINT,
  c VARCHAR,
  d INT
) WITH (
  'connector' = 'datagen'
);

SELECT a, SUM(b), MAX(c) FROM MyTable GROUP BY a;
