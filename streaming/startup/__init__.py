"""The job put together: every command that runs the job (`run`, a promote's catch-up, a failback's reverse run)
starts it here with RunOptions. It sits above the job, Spark, the disaster marks and the tables, which it joins."""
