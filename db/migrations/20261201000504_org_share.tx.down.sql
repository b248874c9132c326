DROP TABLE sa_org_share;
