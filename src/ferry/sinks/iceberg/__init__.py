"""The Iceberg sink (pyiceberg). Importing this package does not import pyiceberg."""
