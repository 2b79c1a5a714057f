public class App {}
