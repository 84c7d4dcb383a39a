	
involvedObject.kind=Pod,reason=R,type==Normal