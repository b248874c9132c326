ALTER TABLE sa_audit ADD CONSTRAINT sa_audit_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs (id);
ALTER TABLE sa_ledger ADD CONSTRAINT sa_ledger_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs (id);
ALTER TABLE sa_edge ADD CONSTRAINT sa_edge_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs (id);
ALTER TABLE sa_operation ADD CONSTRAINT sa_operation_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs (id),
                         ADD CONSTRAINT sa_operation_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id);
ALTER TABLE sa_entity ADD CONSTRAINT sa_entity_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs (id),
                      ADD CONSTRAINT sa_entity_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id);
ALTER TABLE sa_job ADD CONSTRAINT sa_job_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs (id),
                   ADD CONSTRAINT sa_job_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id);
