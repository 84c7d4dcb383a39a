	app in (a),tier
source=x