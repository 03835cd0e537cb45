"""The Apache Fluss sink (``pip install 'ferry[fluss]'``): its config model imports no client library."""
