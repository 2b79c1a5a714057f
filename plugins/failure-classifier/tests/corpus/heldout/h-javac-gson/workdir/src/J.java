import com.google.gson.Gson;

public class J { Gson g = new Gson(); }
