-- Keeps updated_at current on every UPDATE, the PostgreSQL form of ON UPDATE CURRENT_TIMESTAMP.
-- The triggers fire only when the writer did not set updated_at to now() itself.
CREATE OR REPLACE FUNCTION asterion_touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;
