DROP TABLE IF EXISTS asterion_function;
