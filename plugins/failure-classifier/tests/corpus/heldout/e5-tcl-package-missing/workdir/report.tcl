package require json
puts [json::json2dict {{}}]
