-- Renaming b to d and redefining b as a computed column is partially compatible.
-- MAX(c) is unaffected and retains its state.
-- The original SUM(b) is treated as deleted: its accumulated state is discarded.
-- The new SUM(b) is treated as added: it starts accumulating from zero when the job restarts.
CREATE TABLE MyTable (
  a INT,
  d BIGINT,
  c VARCHAR,
  b AS d + 1
) WITH (
  'connector' = 'datagen'
);

SELECT a, SUM(b), MAX(c) FROM MyTable GROUP BY a;
