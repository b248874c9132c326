DROP TABLE sa_usage_period;
DROP TABLE sa_org_budget;
DROP TABLE sa_attempt;
