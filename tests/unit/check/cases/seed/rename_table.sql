-- Incompatible: renaming the table from MyTable to MyTable2.
CREATE TABLE MyTable2 (
  a INT,
  b BIGINT,
  c VARCHAR
) WITH (
  'connector' = 'datagen'
);

SELECT a, SUM(b), MAX(c) FROM MyTable2 GROUP BY a;
