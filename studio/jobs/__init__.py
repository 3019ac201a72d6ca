"""What the Evaluate and Export tabs share: background jobs, their choices and how they look."""
