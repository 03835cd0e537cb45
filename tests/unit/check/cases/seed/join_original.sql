-- Original
CREATE TABLE MyTable1 (
  a INT,
  b BIGINT
) WITH (
  'connector' = 'datagen'
);

CREATE TABLE MyTable2 (
  c INT,
  d BIGINT
) WITH (
  'connector' = 'datagen'
);

SELECT * FROM MyTable1 JOIN MyTable2 ON c = d;
