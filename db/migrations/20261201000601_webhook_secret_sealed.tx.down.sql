-- The removed plain-text secrets cannot be brought back; sealed ones stay as they are.
SELECT 1;
