DROP TABLE IF EXISTS sa_chain_step;
DROP TABLE IF EXISTS sa_chain;
DROP TABLE IF EXISTS sa_delivery_attempt;
DROP TABLE IF EXISTS sa_delivery;
