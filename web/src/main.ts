// Entry point. A small first script: on a comparison's URL it asks for the runs' overlay at
// once (early.ts), then imports the app (app.ts, a chunk of its own), whose fetch and compile
// overlap the server's answer instead of coming before the request.

import "./style.css";
import { askEarly } from "./early";

askEarly();
void import("./app");
