"""What the long memory eval's user tells over months, and asks about later: stories of one
or two statements, each with a question and the words (needles) that show its evidence reached
the request. Two languages, the same stories.

Kinds: `single` (asked in the statement's own words), `paraphrase` (asked in other words),
`two_fact` (needs two statements said sessions apart), `when` (needs the day it was said, the
statement says "yesterday" or "today"), `corrected` (a later statement changes a value; the
old value must not come back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["single", "paraphrase", "two_fact", "when", "corrected"]
KINDS: tuple[Kind, ...] = ("single", "paraphrase", "two_fact", "when", "corrected")


@dataclass(frozen=True, slots=True)
class Story:
    kind: Kind
    said: tuple[str, ...]  # in order, each in a later session than the one before
    question: str
    needles: tuple[str, ...]  # one per statement the answer needs (the last, if corrected)
    stale: str | None = None  # corrected: the old value, which must not come back


def _s(
    kind: Kind, said: str | tuple[str, ...], question: str, *needles: str, stale: str | None = None
) -> Story:
    said = (said,) if isinstance(said, str) else said
    return Story(kind, said, question, needles, stale)


ENGLISH = (
    _s("single", "My sister Lena works as a nurse at the children's hospital.", "What is Lena's job?", "nurse"),
    _s("single", "I signed up for pottery classes on Thursday evenings.", "Which classes did I sign up for?", "pottery"),
    _s("single", "Our new puppy is a beagle called Pepper.", "What breed is Pepper?", "beagle"),
    _s("single", "My manager Okafor wants the quarterly report by the end of the month.", "Who wants the quarterly report?", "Okafor"),
    _s("single", "The plumber said the boiler needs a new pressure valve.", "What does the boiler need?", "pressure valve"),
    _s("single", "I finally finished reading The Master and Margarita.", "Which book did I finish?", "Margarita"),
    _s("single", "My favourite hiking trail is the Lousã ridge loop.", "What is my favourite hiking trail?", "Lousã"),
    _s("single", "Tomas recommended a ramen place called Menya Kaito.", "Which ramen place did Tomas recommend?", "Menya Kaito"),
    _s("single", "Our anniversary dinner is booked at Casa Amália.", "Where is our anniversary dinner booked?", "Casa Amália"),
    _s("single", "I'm allergic to penicillin, the doctor wrote it down.", "What am I allergic to?", "penicillin"),
    _s("single", "My car is a dark green Skoda Octavia from 2014.", "Which car do I drive?", "Octavia"),
    _s("single", "Grandma's lemon cake takes two tablespoons of poppy seeds.", "How many poppy seeds go in grandma's lemon cake?", "two tablespoons"),
    _s("paraphrase", "Lena's husband Marco teaches chemistry at a secondary school.", "What subject does my sister's spouse teach?", "chemistry"),
    _s("paraphrase", "We adopted a grey tabby from the shelter and named her Miso.", "What did we call the kitten we got?", "Miso"),
    _s("paraphrase", "I've been learning the cello for about six months now.", "Which instrument am I studying?", "cello"),
    _s("paraphrase", "My daughter Inês scored the winning goal at her football match.", "What happened at my kid's soccer game?", "winning goal"),
    _s("paraphrase", "The landlord is raising the rent by eighty euros from April.", "How much more will we pay for the flat?", "eighty euros"),
    _s("paraphrase", "I switched to the night shift at the warehouse.", "What hours do I work these days?", "night shift"),
    _s("paraphrase", "Dad had knee surgery and is recovering at home.", "How is my father's health?", "knee surgery"),
    _s("paraphrase", "We're saving up for a sailing trip around the Azores.", "What holiday are we putting money aside for?", "Azores"),
    _s("two_fact", ("At the climbing gym I met a guy named Ravi.", "Ravi plays bass in a jazz trio."), "What instrument does the person I met at the climbing gym play?", "climbing gym", "bass"),
    _s("two_fact", ("My cousin Hiroshi just moved to Osaka.", "Hiroshi opened a small bakery near the station."), "What kind of shop did my cousin open?", "Osaka", "bakery"),
    _s("two_fact", ("My colleague Priya is organising the charity run.", "The charity run raises money for the food bank on Dock Street."), "Which cause does the event my colleague organises support?", "Priya", "food bank"),
    _s("two_fact", ("I bought a Fuji X100 camera in Tokyo.", "I took the Fuji to the Douro valley and shot the vineyards."), "Where did I take the camera I bought in Japan?", "X100", "Douro"),
    _s("two_fact", ("Our neighbour Agnes keeps a vegetable garden.", "Agnes gave us a basket of courgettes."), "What did the neighbour with the garden give us?", "vegetable garden", "courgettes"),
    _s("two_fact", ("Lena's son Tiago turns seven next month.", "Tiago wants a dinosaur kite for his birthday."), "What present does my nephew want?", "Tiago turns seven", "dinosaur kite"),
    _s("two_fact", ("Our team is migrating the billing system to Rust.", "The Rust migration goes live on 12 June."), "When does my team's billing project go live?", "billing system", "12 June"),
    _s("two_fact", ("I joined a Portuguese class at the community centre.", "My Portuguese teacher is called Dona Fernanda."), "Who teaches the language course I joined?", "community centre", "Fernanda"),
    _s("when", "Yesterday I ran the Lisbon half marathon in one hour fifty-two.", "When did I run the half marathon?", "half marathon"),
    _s("when", "This morning I got my driving licence renewed.", "When did I renew my driving licence?", "driving licence"),
    _s("when", "Last night Lena and Marco told us they are expecting a baby.", "When did Lena share the baby news?", "expecting a baby"),
    _s("when", "Today I handed in my resignation at the warehouse.", "When did I resign?", "resignation"),
    _s("when", "I planted the tomato seedlings today.", "When did I plant the tomatoes?", "tomato seedlings"),
    _s("when", "We got back from Madeira yesterday.", "When did we get back from Madeira?", "Madeira"),
    _s("corrected", ("My gym membership costs 35 euros a month.", "Correction: my gym membership is actually 42 euros a month."), "How much is my gym membership?", "42 euros", stale="35 euros"),
    _s("corrected", ("My dentist appointment is on 9 May.", "My dentist appointment has moved to 16 May."), "When is my dentist appointment?", "16 May", stale="9 May"),
    _s("corrected", ("My work phone extension is 4471.", "My work phone extension is now 4489."), "What is my work phone extension?", "4489", stale="4471"),
    _s("corrected", ("My dog's vet is Dr Almeida in Benfica.", "Update: my dog's vet is Dr Sousa in Alvalade now."), "Who is my dog's vet?", "Sousa", stale="Almeida"),
    _s("corrected", ("My locker at the pool is number 118.", "My locker at the pool is now number 207."), "Which locker do I have at the pool?", "207", stale="118"),
)  # fmt: skip

CHINESE = (
    _s("single", "我妹妹李娜在儿童医院当护士。", "李娜是做什么工作的？", "护士"),
    _s("single", "我报名了每周四晚上的陶艺课。", "我报名了什么课？", "陶艺"),
    _s("single", "我们新养的小狗是一只比格犬，叫胡椒。", "胡椒是什么品种的狗？", "比格"),
    _s("single", "我的经理欧阳要我在月底前交季度报告。", "谁要季度报告？", "欧阳"),
    _s("single", "水管工说锅炉需要换一个新的减压阀。", "锅炉需要换什么？", "减压阀"),
    _s("single", "我终于读完了《大师和玛格丽特》。", "我读完了哪本书？", "玛格丽特"),
    _s("single", "我最喜欢的徒步路线是天目山环线。", "我最喜欢哪条徒步路线？", "天目山"),
    _s("single", "小唐推荐了一家拉面店，叫面屋海斗。", "小唐推荐的拉面店叫什么？", "面屋海斗"),
    _s("single", "我们的结婚纪念日晚餐订在了外婆家餐厅。", "纪念日晚餐订在哪里？", "外婆家"),
    _s("single", "我对青霉素过敏，医生已经记下了。", "我对什么过敏？", "青霉素"),
    _s("single", "我的车是一辆2014年的深绿色斯柯达明锐。", "我开的是什么车？", "明锐"),
    _s("single", "外婆的柠檬蛋糕要放两大勺罂粟籽。", "外婆的柠檬蛋糕要放多少罂粟籽？", "两大勺"),
    _s("paraphrase", "李娜的丈夫马可在一所中学教化学。", "我妹妹的爱人教什么科目？", "化学"),
    _s("paraphrase", "我们从收容所领养了一只灰色虎斑猫，给它起名叫味噌。", "我们领回来的小猫叫什么名字？", "味噌"),
    _s("paraphrase", "我学大提琴已经快半年了。", "我最近在学什么乐器？", "大提琴"),
    _s("paraphrase", "我女儿小雨在足球比赛里踢进了制胜球。", "孩子的球赛上发生了什么？", "制胜球"),
    _s("paraphrase", "房东说从四月起房租每月涨八十元。", "以后住的地方要多交多少钱？", "八十元"),
    _s("paraphrase", "我在仓库调到了夜班。", "我现在上班的时间是怎样的？", "夜班"),
    _s("paraphrase", "我爸做了膝盖手术，正在家里休养。", "我父亲的身体怎么样？", "膝盖手术"),
    _s("paraphrase", "我们在攒钱去亚速尔群岛航海旅行。", "我们在为哪次度假存钱？", "亚速尔"),
    _s("two_fact", ("我在攀岩馆认识了一个叫拉维的人。", "拉维在一个爵士三重奏里弹贝斯。"), "我在攀岩馆认识的那个人弹什么乐器？", "攀岩馆", "贝斯"),
    _s("two_fact", ("我表哥浩然刚搬到大阪。", "浩然在车站附近开了一家小面包店。"), "我表哥开了一家什么店？", "大阪", "面包店"),
    _s("two_fact", ("我同事普丽娅在组织慈善跑。", "慈善跑的善款捐给码头街的食物银行。"), "我同事组织的活动是为哪个机构筹款？", "普丽娅", "食物银行"),
    _s("two_fact", ("我在东京买了一台富士X100相机。", "我带着那台富士去了婺源拍梯田。"), "我在日本买的相机带去了哪里？", "X100", "婺源"),
    _s("two_fact", ("我们的邻居王阿姨有一个菜园。", "王阿姨送了我们一篮西葫芦。"), "有菜园的那位邻居送了我们什么？", "菜园", "西葫芦"),
    _s("two_fact", ("李娜的儿子乐乐下个月满七岁。", "乐乐想要一个恐龙风筝当生日礼物。"), "我外甥想要什么礼物？", "满七岁", "恐龙风筝"),
    _s("two_fact", ("我们组正在把计费系统迁移到Rust。", "Rust迁移定在6月12日上线。"), "我们组的计费项目什么时候上线？", "计费系统", "6月12日"),
    _s("two_fact", ("我在社区中心报了一个葡萄牙语班。", "我的葡萄牙语老师叫费尔南达。"), "我报的语言课是谁教的？", "社区中心", "费尔南达"),
    _s("when", "昨天我跑了杭州半程马拉松，用时一小时五十二分。", "我是哪天跑的半程马拉松？", "半程马拉松"),
    _s("when", "今天上午我把驾照换了新的。", "我是哪天换的驾照？", "驾照"),
    _s("when", "昨晚李娜和马可告诉我们他们要当爸妈了。", "李娜是哪天告诉我们要当爸妈的？", "当爸妈"),
    _s("when", "今天我在仓库递交了辞职信。", "我是哪天辞职的？", "辞职信"),
    _s("when", "今天我把番茄苗种下去了。", "我是哪天种的番茄？", "番茄苗"),
    _s("when", "我们昨天从厦门回来了。", "我们是哪天从厦门回来的？", "厦门"),
    _s("corrected", ("我的健身房会员费是每月三百五十元。", "更正：我的健身房会员费是每月四百二十元。"), "我的健身房会员费是多少？", "四百二十元", stale="三百五十元"),
    _s("corrected", ("我的牙医预约在5月9日。", "我的牙医预约改成了5月16日。"), "我的牙医预约是哪天？", "5月16日", stale="5月9日"),
    _s("corrected", ("我的工作分机号是4471。", "我的工作分机号现在是4489。"), "我的工作分机号是多少？", "4489", stale="4471"),
    _s("corrected", ("我的宠物医生是西湖宠物医院的阿尔梅达医生。", "更新：我的宠物医生现在是城东宠物医院的苏萨医生。"), "我家狗的兽医是谁？", "苏萨", stale="阿尔梅达"),
    _s("corrected", ("我的游泳馆储物柜是118号。", "我的游泳馆储物柜改成了207号。"), "我在游泳馆用哪个储物柜？", "207", stale="118"),
)  # fmt: skip

# Small talk between the stories: it fills the window, and shares words with the stories.
ENGLISH_FILLERS = (
    "Good morning! The coffee machine is finally fixed.", "It rained the whole afternoon again.",
    "Lena called to say hi, nothing special.", "I watched a documentary about octopuses.",
    "Work was quiet today, mostly emails.", "We had pasta with pesto for dinner.",
    "The train was twenty minutes late this morning.", "I went for a short run by the river.",
    "My phone battery keeps dying early.", "The neighbours are painting their fence blue.",
    "I'm thinking about learning to bake bread.", "Traffic on the bridge was terrible.",
    "We played board games until midnight.", "The camera app on my phone crashed again.",
    "I found an old photo album in the attic.", "The supermarket ran out of oat milk.",
    "Marco sent a funny video of a parrot.", "I should call the bank about the card.",
    "The garden needs watering, it's so dry.", "I tried a new yoga video this evening.",
    "The meeting ran over by half an hour.", "We ordered pizza, too tired to cook.",
    "I can't decide what to read next.", "The dog chewed one of my slippers.",
    "My back is a bit stiff from sitting all day.", "The weekend went by far too fast.",
    "I cleaned out the fridge, long overdue.", "The new season of that crime show is out.",
)  # fmt: skip

CHINESE_FILLERS = (
    "早上好！咖啡机终于修好了。", "今天下午又下了一下午雨。", "李娜打电话来问好，没什么特别的事。",
    "我看了一部关于章鱼的纪录片。", "今天工作挺清闲，主要是回邮件。", "我们晚饭吃了青酱意面。",
    "早上的火车晚点了二十分钟。", "我沿着河边跑了一小段。", "我的手机电池老是很快没电。",
    "邻居在把篱笆刷成蓝色。", "我在考虑学着自己做面包。", "桥上堵车堵得厉害。",
    "我们玩桌游玩到半夜。", "手机上的相机应用又闪退了。", "我在阁楼里翻到一本旧相册。",
    "超市的燕麦奶卖完了。", "马可发来一个鹦鹉的搞笑视频。", "我得给银行打电话说说卡的事。",
    "花园太干了，得浇水了。", "今晚试了一个新的瑜伽视频。", "会议拖了半个小时。",
    "我们点了披萨，累得不想做饭。", "不知道接下来读什么书好。", "狗把我的一只拖鞋咬坏了。",
    "坐了一整天，背有点僵。", "周末过得太快了。", "我把冰箱清理了一遍，早该清了。",
    "那部犯罪剧出新一季了。",
)  # fmt: skip

REPLIES = {"en": "Noted.", "zh": "好的，记下了。"}
