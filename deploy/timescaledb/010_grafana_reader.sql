-- Grafana's own database role: it may read everything and change nothing.
--
-- docker-compose.yml mounts this file into the timescaledb image's /docker-entrypoint-initdb.d/,
-- so the image's entrypoint runs it once, through psql, when it creates the database (an empty
-- volume). The password comes from the environment (deploy/secrets/grafana.env), never from this
-- file; psql 15's \getenv reads it. The tables do not exist yet at this point (`fabricmon migrate`
-- creates them later), so the role is given pg_read_all_data, which covers future tables too.

\set ON_ERROR_STOP on
\getenv reader_password GRAFANA_DB_PASSWORD
\getenv reader GRAFANA_DB_USER
\if :{?reader}
\else
\set reader grafana_reader
\endif

\if :{?reader_password}
CREATE ROLE :"reader" LOGIN PASSWORD :'reader_password';
GRANT pg_read_all_data TO :"reader";
-- Belt and braces: even a hand-written Grafana query cannot write, or run away with the server.
ALTER ROLE :"reader" SET default_transaction_read_only = on;
ALTER ROLE :"reader" SET statement_timeout = '60s';
\else
DO $$ BEGIN RAISE EXCEPTION 'GRAFANA_DB_PASSWORD is not set: put it in deploy/secrets/grafana.env'; END $$;
\endif
