public class Main {
    static { System.loadLibrary("zstdcorpusjni"); }
    public static void main(String[] args) { System.out.println("ok"); }
}
