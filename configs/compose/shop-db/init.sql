-- The shop database compose.yaml captures: one table, app_db.orders, whose changes Debezium's
-- PostgreSQL connector streams to the topic shop.app_db.orders. Run once, when the volume is new.
CREATE SCHEMA app_db;
CREATE TABLE app_db.orders (
    id serial PRIMARY KEY,
    item text NOT NULL,
    qty integer NOT NULL
);
INSERT INTO app_db.orders (item, qty) SELECT 'item-' || n, n FROM generate_series(1, 10) AS n;
