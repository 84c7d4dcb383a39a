	!x,app!=b
metadata.namespace!=default