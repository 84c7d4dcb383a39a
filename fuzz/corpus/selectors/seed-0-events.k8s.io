	app=a,tier in (b,c)
metadata.name=fz